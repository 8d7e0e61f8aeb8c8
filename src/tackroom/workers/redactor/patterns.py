"""What the redactor looks for, and how it rewrites a function result.

A pattern is a name and a Python regular expression. A match is replaced by the replacement
template (``[REDACTED:{name}]`` by default); when the expression has a group named ``secret``,
only that group is replaced, so ``Authorization: Bearer abc…`` becomes ``Authorization: Bearer
[REDACTED:bearer_token]``. Patterns run in order, each on the text the previous one left.

A function result's text is often the function's return value as JSON (the orchestrator shows a
value that is not already a result that way), so a line break inside a string is the two
characters ``\\n``: a leading ``\\b`` does not hold after one. The defaults start with
:data:`START` instead — not after a letter, digit or ``_``, or right after an escaped ``\\n``,
``\\r`` or ``\\t``.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = [
    "DEFAULT_PATTERNS",
    "DEFAULT_REPLACEMENT",
    "MAX_DEPTH",
    "START",
    "RedactPattern",
    "Redactor",
    "TooDeep",
    "check_replacement",
]

START = r"(?:(?<![A-Za-z0-9_])|(?<=\\[nrt]))"
"""A left boundary that also holds after a JSON-escaped line break or tab."""

DEFAULT_REPLACEMENT = "[REDACTED:{name}]"

MAX_DEPTH = 96
"""Deeper nesting in a result is not walked: the hook blocks (the result is withheld). Below the
engine's own limit (128 levels, ``tackroom.engine.jsonvalue.MAX_DEPTH``) with room for the hook's
envelope around the result, so a result the bus carries to the hook is one it can judge."""


class RedactPattern(BaseModel):
    """``{name, regex}``: what to find, and the name the replacement shows."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    regex: str = Field(min_length=1)

    @field_validator("regex")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            compiled = re.compile(value)
        except re.error as exc:
            raise ValueError(f"invalid regular expression {value!r}: {exc}") from None
        if compiled.fullmatch("") is not None:
            raise ValueError(f"{value!r} matches the empty string, so it would match everywhere")
        return value


def check_replacement(template: str) -> str:
    """``template`` if it formats with ``{name}`` alone; else ``ValueError``."""
    try:
        template.format(name="x")
    except (KeyError, IndexError, ValueError) as exc:
        raise ValueError(
            f"replacement {template!r} must be text with at most the placeholder {{name}}"
            f" ({type(exc).__name__}: {exc})"
        ) from None
    return template


def _p(name: str, regex: str) -> RedactPattern:
    return RedactPattern(name=name, regex=regex)


DEFAULT_PATTERNS: tuple[RedactPattern, ...] = (
    _p(
        "private_key",
        r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY-----(?s:.*?)"
        r"(?:-----END [A-Z0-9 ]{0,40}PRIVATE KEY-----|\Z)",
    ),
    _p("anthropic_key", START + r"sk-ant-[A-Za-z0-9_-]{16,}"),
    _p("openai_key", START + r"sk-[A-Za-z0-9_-]{16,}"),
    _p("stripe_key", START + r"(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"),
    _p("aws_access_key_id", START + r"(?:AKIA|ASIA)[0-9A-Z]{16}(?![A-Za-z0-9])"),
    _p("github_token", START + r"(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})"),
    _p("slack_token", START + r"xox[abposr]-[A-Za-z0-9-]{10,}"),
    _p("google_api_key", START + r"AIza[0-9A-Za-z_-]{35}"),
    _p("jwt", START + r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    _p("bearer_token", START + r"(?i:bearer)[ \t]+(?P<secret>[A-Za-z0-9._~+/-]{8,}=*)"),
    _p(
        "url_credentials",
        START + r"[A-Za-z][A-Za-z0-9+.-]{0,31}://[^\s/:@\"'\\]+:(?P<secret>[^\s/@\"'\\]+)@",
    ),
    _p(
        "secret_assignment",
        START
        + r"[A-Za-z0-9_]{0,64}(?i:password|passwd|secret|token|api_?key|access_?key)"
        + r"\\?[\"']?[ \t]*[:=][ \t]*\\?[\"']?"
        + r"(?P<secret>[^\s'\",;\\\[][^\s'\",;\\]{7,})",
    ),
)
"""API keys of the common providers, AWS key ids, tokens, private keys, credentials in URLs and
``…PASSWORD=`` / ``…_TOKEN:`` style assignments."""


class TooDeep(ValueError):
    """The result nests deeper than :data:`MAX_DEPTH`."""


@dataclass(frozen=True, slots=True)
class _Compiled:
    name: str
    regex: re.Pattern[str]
    token: str
    has_secret_group: bool


class Redactor:
    """Compiled patterns; :meth:`text` scrubs a string, :meth:`result` a function result."""

    def __init__(
        self, patterns: list[RedactPattern] | tuple[RedactPattern, ...], *, replacement: str
    ) -> None:
        check_replacement(replacement)
        self._patterns = [
            _Compiled(
                name=p.name,
                regex=(compiled := re.compile(p.regex)),
                token=replacement.format(name=p.name),
                has_secret_group="secret" in compiled.groupindex,
            )
            for p in patterns
        ]

    @property
    def names(self) -> list[str]:
        return [p.name for p in self._patterns]

    def text(self, text: str, counts: Counter[str] | None = None) -> str:
        """``text`` with every match replaced; ``counts[name]`` grows by the matches replaced."""
        for pattern in self._patterns:

            def replace(match: re.Match[str], pattern: _Compiled = pattern) -> str:
                whole = match.group(0)
                if not whole:
                    return whole
                if counts is not None:
                    counts[pattern.name] += 1
                if pattern.has_secret_group:
                    start, end = match.span("secret")
                    if end > start:  # the group took part: keep what surrounds it
                        base = match.start()
                        return whole[: start - base] + pattern.token + whole[end - base :]
                return pattern.token

            text = pattern.regex.sub(replace, text)
        return text

    def value(self, value: Any, counts: Counter[str], *, depth: int = 0) -> Any:
        """A JSON value with every string (keys too) scrubbed."""
        if depth > MAX_DEPTH:
            raise TooDeep(f"the result nests deeper than {MAX_DEPTH} levels")
        if isinstance(value, str):
            return self.text(value, counts)
        if isinstance(value, list):
            return [self.value(item, counts, depth=depth + 1) for item in value]
        if isinstance(value, dict):
            scrubbed: dict[str, Any] = {}
            for key, item in value.items():
                new_key = self.text(key, counts) if isinstance(key, str) else key
                while new_key in scrubbed:  # two keys that scrub to the same text: keep both
                    new_key = f"{new_key}~"
                scrubbed[new_key] = self.value(item, counts, depth=depth + 1)
            return scrubbed
        return value

    def result(self, result: dict[str, Any], counts: Counter[str]) -> dict[str, Any]:
        """A ``FunctionResultMessage`` (as JSON) with its text blocks and ``details`` scrubbed.

        Image blocks are left alone (their data is base64, not text); any other block has every
        string scrubbed.
        """
        scrubbed = dict(result)
        content = result.get("content")
        if isinstance(content, list):
            scrubbed["content"] = [self._block(block, counts) for block in content]
        if "details" in result:
            scrubbed["details"] = self.value(result["details"], counts, depth=1)
        return scrubbed

    def _block(self, block: Any, counts: Counter[str]) -> Any:
        if isinstance(block, dict) and block.get("type") == "image":
            return block
        return self.value(block, counts, depth=2)
