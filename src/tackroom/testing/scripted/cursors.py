"""Which turn answers a call: one shared sequence, a fresh copy per session, or keyed sequences.

A cursor moves in one of two ways (:data:`CursorMode`):

- ``calls`` (default): each call takes the next turn of its sequence, so the position lives in
  this process's memory;
- ``transcript``: the turn is picked from the request itself — turn ``i`` (0-based) answers a
  request whose messages hold ``i`` assistant messages. Nothing is remembered between calls, so
  a call repeated after a crash (a restarted harness asking the same question again) gets the
  same answer, and a restarted provider goes on where the transcript stands.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from tackroom.testing.scripted.frames import CompiledTurn

__all__ = ["CursorMode", "Cursors", "Exhausted", "NoSession"]

CursorMode = Literal["calls", "transcript"]


@dataclass(frozen=True, slots=True)
class Exhausted:
    """The call's sequence has no turn for it: this is call (or turn) ``number`` of it."""

    key: str | None
    number: int
    length: int
    mode: CursorMode = "calls"


@dataclass(frozen=True, slots=True)
class NoSession:
    """A per-session script was called without a session id."""


class _Cursor:
    __slots__ = ("position", "turns")

    def __init__(self, turns: tuple[CompiledTurn, ...]) -> None:
        self.turns = turns
        self.position = 0
        """Turns replayed: the next one in ``calls`` mode; one past the furthest reached in
        ``transcript`` mode."""


class Cursors:
    """Cursors over the default sequence and the keyed (``session:``) sequences.

    A session with a keyed sequence always uses it. Other calls use the default sequence: one
    shared cursor, or with ``per_session`` one fresh cursor per ``session_id``.
    """

    def __init__(
        self,
        default: tuple[CompiledTurn, ...],
        keyed: Mapping[str, tuple[CompiledTurn, ...]],
        *,
        per_session: bool,
        mode: CursorMode = "calls",
    ) -> None:
        self._default = default
        self._keyed = dict(keyed)
        self._per_session = per_session
        self._mode: CursorMode = mode
        self._cursors: dict[str | None, _Cursor] = {}
        self._default_used = False

    @property
    def mode(self) -> CursorMode:
        return self._mode

    def take(
        self, session_id: str | None, *, assistant_turns: int = 0
    ) -> CompiledTurn | Exhausted | NoSession:
        """The turn for a call of ``session_id``.

        ``calls`` mode: the next turn (the cursor moves on). ``transcript`` mode: turn number
        ``assistant_turns`` (how many assistant messages the request holds).
        """
        key: str | None
        if session_id is not None and session_id in self._keyed:
            key, turns = session_id, self._keyed[session_id]
        elif self._per_session:
            if session_id is None:
                return NoSession()
            key, turns = session_id, self._default
            self._default_used = True
        else:
            key, turns = None, self._default
            self._default_used = True
        cursor = self._cursors.get(key)
        if cursor is None:
            cursor = self._cursors[key] = _Cursor(turns)
        index = cursor.position if self._mode == "calls" else assistant_turns
        if index >= len(cursor.turns):
            return Exhausted(key, index + 1, len(cursor.turns), self._mode)
        cursor.position = max(cursor.position, index + 1)
        return cursor.turns[index]

    @property
    def sessions_started(self) -> list[str]:
        return [key for key in self._cursors if key is not None]

    @property
    def default_used(self) -> bool:
        return self._default_used

    def remaining(self) -> dict[str | None, int]:
        """Turns not replayed, per cursor key (``None``: the shared or never-used default).

        In ``transcript`` mode a turn counts as replayed once it or a later one was served.
        """
        out: dict[str | None, int] = {}
        for key, cursor in self._cursors.items():
            if cursor.position < len(cursor.turns):
                out[key] = len(cursor.turns) - cursor.position
        for session_id, turns in self._keyed.items():
            if session_id not in self._cursors:
                out[session_id] = len(turns)
        if self._default and not self._default_used:
            out[None] = len(self._default)
        return out
