"""Where a value came from, and what the gate knows of a call's data flow.

Prompt-injection containment rests on two facts the harness can establish whatever the model
does: which entries of a session came from a source nobody vouches for (a fetched page, an MCP
server's reply, a file such a tool wrote), and which argument values of a call were copied from
them. Every entry carries a :class:`Label`; the gate turns the labels of the context a model read
into :class:`FlowFacts` for each call it asks for, and the policy decides on them
(:func:`flow_verdict` is the safe default set every policy worker applies).

A label only ever gets less trusted as values move: a summary of untrusted text is untrusted, a
file written while the context held untrusted text is untrusted when read back, a child agent's
answer is as trusted as what it read.
"""

from __future__ import annotations

import re
from collections.abc import Container, Iterable, Iterator, Mapping, Sequence
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import Field

from tackroom.contracts._base import Strict

__all__ = [
    "LABEL_KEY",
    "MIN_COPIED_CHARS",
    "SIDE_EFFECTS",
    "FlowFacts",
    "Label",
    "SideEffect",
    "Source",
    "TextPool",
    "argument_leaves",
    "copied_from",
    "joined",
    "normalized",
    "string_leaves",
    "untrusted_label",
]

LABEL_KEY = "_label"
"""A tool's reply may carry its result's :class:`Label` under this key (``fs::read`` of a file an
untrusted source wrote); the orchestrator takes it off before the model reads the reply, and a
tool can only make its result less trusted than its declared traits say, never more."""

Source = Literal["user", "system", "model", "tool", "untrusted"]
"""``user``: the person the run acts for; ``system``: the harness and the application (system
prompt, instructions, notes); ``model``: an answer the model wrote; ``tool``: a tool the
application trusts; ``untrusted``: anything a third party could have written."""

SideEffect = Literal["none", "internal", "external"]
"""What a call may change: ``none`` (it reads), ``internal`` (the session's own workspace or
memory) or ``external`` (anything a third party can see: a message sent, a request made, money
moved). A tool that declares nothing is ``none`` when ``read_only`` and ``external`` otherwise."""
SIDE_EFFECTS: tuple[SideEffect, ...] = ("none", "internal", "external")

MIN_COPIED_CHARS = 4
"""An argument value shorter than this (after normalizing) is never said to be copied: ``"no"``
or ``"12"`` occur in any text."""


class Label(Strict):
    """Where an entry's content came from. An entry without one is labelled by its role
    (a user message by ``user``, a function result by ``tool``...)."""

    schema_version: Literal[1] = 1
    source: Source
    origins: list[str] = Field(
        default_factory=list,
        max_length=64,
        description="what it came from: function ids, files (file:<path>), agents",
    )
    typed: bool = Field(
        default=False,
        description="untrusted, but validated against a schema (quarantine::extract): enums,"
        " bounded strings, numbers — no free text",
    )
    secret: bool = Field(
        default=False, description="holds a secret: never to reach a tool that sends data out"
    )

    @property
    def untrusted(self) -> bool:
        return self.source == "untrusted"


class FlowFacts(Strict):
    """What the gate knows of one call's data flow, for the policy to decide on: whether the
    context the model read when it asked for the call held untrusted content, what the tool may
    change, and which arguments were copied from untrusted (or secret) content."""

    schema_version: Literal[1] = 1
    context_untrusted: bool = Field(
        default=False, description="the model's context held untrusted content"
    )
    untrusted_sources: list[str] = Field(
        default_factory=list, description="where that content came from (function ids, files)"
    )
    side_effect: SideEffect = Field(default="external", description="what the tool may change")
    sinks: list[str] = Field(
        default_factory=list,
        description="the tool's arguments that say where data goes (to, url, recipient)",
    )
    args_from_untrusted: dict[str, list[str]] = Field(
        default_factory=dict,
        description="arguments with a value copied verbatim from untrusted free text, and its"
        " origins",
    )
    args_from_typed: dict[str, list[str]] = Field(
        default_factory=dict,
        description="arguments with a value found only in untrusted values a quarantined reader"
        " typed (enums, bounded strings, numbers)",
    )
    args_from_secret: dict[str, list[str]] = Field(
        default_factory=dict, description="arguments with a value copied from a secret"
    )


def untrusted_label(*origins: str, typed: bool = False) -> Label:
    return Label(source="untrusted", origins=list(dict.fromkeys(origins)), typed=typed)


def joined(labels: Iterable[Label | None], *, source: Source = "system") -> Label | None:
    """The label of content made from all of ``labels`` (a summary, a child's answer): untrusted
    when any is, secret when any is, typed only when every untrusted one is. ``None`` when none
    is untrusted or secret (the content takes its role's label)."""
    present = [label for label in labels if label is not None]
    tainted = [label for label in present if label.untrusted]
    secret = any(label.secret for label in present)
    if not tainted and not secret:
        return None
    origins = list(dict.fromkeys(o for label in tainted or present for o in label.origins))
    if not tainted:
        return Label(source=source, origins=origins[:64], secret=True)
    typed = all(label.typed for label in tainted)
    return Label(source="untrusted", origins=origins[:64], typed=typed, secret=secret)


_SPACE = re.compile(r"\s+")


def normalized(text: str) -> str:
    """Text as values are compared: case folded, runs of white space one space."""
    return _SPACE.sub(" ", text.casefold()).strip()


def string_leaves(value: Any) -> Iterator[str]:
    """Every string (and number, as text) inside an argument value, normalized."""
    if isinstance(value, str):
        yield normalized(value)
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, (int, float)):
        yield normalized(str(value))
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from string_leaves(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from string_leaves(item)


_TOKEN = re.compile(r"[^\W_]+")


def tokens_of(text: str) -> set[str]:
    """The words and numbers of ``text`` (runs of letters and digits)."""
    return set(_TOKEN.findall(text))


def _holds_token(haystack: Container[str], token: str) -> bool:
    if isinstance(haystack, TextPool):
        return token in haystack.tokens()
    return isinstance(haystack, str) and token in tokens_of(haystack)


def _parts(leaf: str, *, destination: bool) -> list[str]:
    """What of ``leaf`` is compared: the value whole, and for a destination the host of a URL in
    it too (``https://evil.example/?q=<data>`` is copied from a page that names evil.example)."""
    if not destination or "://" not in leaf:
        return [leaf]
    host = urlsplit(leaf.split()[0]).hostname or ""
    return [leaf, host] if len(host) >= MIN_COPIED_CHARS else [leaf]


class TextPool:
    """Normalized texts with their origins, searched as one text first: a value found nowhere
    (the usual case) costs one substring search, whatever the number of texts."""

    __slots__ = ("_joined", "_tokens", "items")

    def __init__(self, items: Iterable[tuple[str, str]] = ()) -> None:
        self.items: list[tuple[str, str]] = list(items)
        self._joined: str | None = None
        self._tokens: set[str] | None = None

    def add(self, origin: str, text: str) -> None:
        self.items.append((origin, text))
        self._joined = None
        self._tokens = None

    def tokens(self) -> set[str]:
        """Every word and number of the texts (what a short destination is compared with)."""
        if self._tokens is None:
            self._tokens = {token for _, text in self.items for token in tokens_of(text)}
        return self._tokens

    def origins_of_token(self, token: str) -> list[str]:
        if token not in self.tokens():
            return []
        return [origin for origin, text in self.items if token in tokens_of(text)]

    def __bool__(self) -> bool:
        return bool(self.items)

    def __contains__(self, part: object) -> bool:
        if not isinstance(part, str):
            return False
        if self._joined is None:
            self._joined = "\x00".join(text for _, text in self.items)
        return part in self._joined

    def origins_of(self, part: str, *, inside: bool = False) -> list[str]:
        """The origins of the texts holding ``part`` (with ``inside``, also of the texts
        ``part`` holds)."""
        if inside:
            return [
                origin
                for origin, text in self.items
                if part in text or (len(text) >= MIN_COPIED_CHARS and text in part)
            ]
        if part not in self:
            return []
        return [origin for origin, text in self.items if part in text]


def argument_leaves(arguments: Mapping[str, Any]) -> dict[str, list[str]]:
    """Each argument's strings and numbers, normalized: what :func:`copied_from` compares."""
    return {name: list(string_leaves(value)) for name, value in arguments.items()}


def _found(
    part: str,
    sources: TextPool,
    trusted: Sequence[Container[str]],
    *,
    destination: bool,
    inside: bool,
) -> list[str]:
    """The origins ``part`` was copied from (none when the trusted texts hold it too)."""
    if len(part) >= MIN_COPIED_CHARS:
        held = sources.origins_of(part, inside=inside)
        if held and not any(part in text for text in trusted):
            return held
        return []
    if not destination or not part or _TOKEN.fullmatch(part) is None:
        return []
    held = sources.origins_of_token(part)
    if held and not any(_holds_token(text, part) for text in trusted):
        return held
    return []


def copied_from(
    leaves: Mapping[str, list[str]],
    sources: TextPool,
    *,
    trusted: Sequence[Container[str]] = (),
    destinations: Iterable[str] = (),
    inside: bool = False,
) -> dict[str, list[str]]:
    """Each argument (its :func:`argument_leaves`) with a value found verbatim in one of
    ``sources`` (normalized texts with their origins) and not in ``trusted`` (what the user,
    the system or a trusted tool wrote), with the origins it was found in. Values shorter than
    :data:`MIN_COPIED_CHARS` are ignored — but for a destination, where a short value names
    what is acted on (``file_id: "13"``), it counts when it stands as a word of its own; a
    destination argument's URL host is compared too; with ``inside``, a source text found inside
    a value counts as well (a secret pasted into a longer message)."""
    found: dict[str, list[str]] = {}
    if not sources:
        return found
    sinks = set(destinations)
    for name, values in leaves.items():
        origins: list[str] = []
        for leaf in values:
            for part in _parts(leaf, destination=name in sinks):
                origins.extend(
                    _found(part, sources, trusted, destination=name in sinks, inside=inside)
                )
        if origins:
            found[name] = list(dict.fromkeys(origins))
    return found
