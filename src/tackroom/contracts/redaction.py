"""What a redaction looks for: named patterns of secrets (the ``redactor`` worker's, and span
summaries').

The scrubbing itself is :class:`tackroom.kit.redaction.Redactor`. A pattern is a name and a
Python regular expression. A match is replaced by the replacement template
(``[REDACTED:{name}]`` by default); when the expression has a group named ``secret``, only that
group is replaced, so ``Authorization: Bearer abc…`` becomes ``Authorization: Bearer
[REDACTED:bearer_token]``. Patterns run in order, each on the text the previous one left.

A function result's text is often the function's return value as JSON (the orchestrator shows a
value that is not already a result that way), so a line break inside a string is the two
characters ``\\n``: a leading ``\\b`` does not hold after one. The defaults start with
:data:`START` instead — not after a letter, digit or ``_``, or right after an escaped ``\\n``,
``\\r`` or ``\\t``.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = [
    "DEFAULT_PATTERNS",
    "DEFAULT_REPLACEMENT",
    "START",
    "RedactPattern",
    "check_replacement",
]

START = r"(?:(?<![A-Za-z0-9_])|(?<=\\[nrt]))"
"""A left boundary that also holds after a JSON-escaped line break or tab."""

DEFAULT_REPLACEMENT = "[REDACTED:{name}]"


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
