"""Scrubbing secrets from text and JSON values: one implementation for the ``redactor`` worker
(function results, before the model sees them) and span summaries (before a span is exported).

:class:`Redactor` runs named patterns (:mod:`tackroom.contracts.redaction`) in order; a match is
replaced by the replacement template, or only its ``secret`` group when the pattern has one.
:func:`mask_values` replaces known secret values (a key read from the environment, say) wherever
they appear, whatever they look like.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from tackroom.contracts.redaction import RedactPattern, check_replacement

__all__ = ["MAX_DEPTH", "MIN_SECRET_CHARS", "Redactor", "TooDeep", "mask_values"]

MAX_DEPTH = 96
"""Deeper nesting in a result is not walked: the hook blocks (the result is withheld). Below the
engine's own limit (128 levels, ``tackroom.engine.jsonvalue.MAX_DEPTH``) with room for the hook's
envelope around the result, so a result the bus carries to the hook is one it can judge."""


MIN_SECRET_CHARS = 4
"""Shorter known values are not masked: they would mask common words and digits."""


def mask_values(
    text: str, secrets: Iterable[str], *, replacement: str = "[REDACTED:secret]"
) -> str:
    """``text`` with every occurrence of each secret value (longest first, so one that contains
    another goes whole) replaced."""
    for secret in sorted({s for s in secrets if len(s) >= MIN_SECRET_CHARS}, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, replacement)
    return text


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
