"""Which turn answers a call: one shared sequence, a fresh copy per session, or keyed sequences.

A cursor moves in one of two ways (:data:`CursorMode`):

- ``calls`` (default): each call takes the next turn of its sequence. The count of calls lives
  where :data:`CursorState` says: in this provider's memory (``process``: one replica), or in
  engine state (``engine``: every replica of the provider, in any process, takes the next turn of
  one count — see :mod:`~tackroom.testing.scripted.tally`);
- ``transcript``: the turn is picked from the request itself — turn ``i`` (0-based) answers a
  request whose messages hold ``i`` assistant messages. Nothing is remembered between calls, so
  a call repeated after a crash (a restarted harness asking the same question again) gets the
  same answer, and a restarted provider goes on where the transcript stands.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, Protocol

from tackroom.testing.scripted.frames import CompiledTurn

__all__ = [
    "CallCounter",
    "CursorMode",
    "CursorState",
    "Cursors",
    "Exhausted",
    "Miss",
    "NoSession",
    "OtherScripts",
]

CursorMode = Literal["calls", "transcript"]
CursorState = Literal["process", "engine"]


@dataclass(frozen=True, slots=True)
class Exhausted:
    """The call's sequence has no turn for it: this is call (or turn) ``number`` of it."""

    key: str | None
    number: int
    length: int
    mode: CursorMode = "calls"

    def describe(self, *, call: int, provider: str) -> str:
        where = f" of session {self.key}" if self.key is not None else ""
        what = (
            f"call {self.number}{where}"
            if self.mode == "calls"
            else f"a request{where} with {self.number - 1} assistant message(s)"
        )
        return f"{what} was not expected: the script has {self.length} turn(s)"


@dataclass(frozen=True, slots=True)
class NoSession:
    """A per-session script was called without a session id."""

    def describe(self, *, call: int, provider: str) -> str:
        return f"call {call} has no session_id (the script is per session)"


@dataclass(frozen=True, slots=True)
class OtherScripts:
    """Replicas replaying other scripts (their digests) took calls of this sequence too."""

    key: str | None
    mine: str
    others: tuple[str, ...]

    def describe(self, *, call: int, provider: str) -> str:
        where = f"session {self.key}" if self.key is not None else "the shared sequence"
        return (
            f"{where} is answered by replicas of provider {provider!r} that replay different"
            f" scripts (this one {self.mine}, others {', '.join(self.others)}): give every"
            " replica on the bus the same script, or run them on separate buses"
        )


Miss = Exhausted | NoSession | OtherScripts
"""Why a call gets no turn (a strictness violation); ``describe()`` says so in one line."""


class CallCounter(Protocol):
    """A count of calls per sequence kept outside this provider (the engine's state)."""

    digest: str
    """The script's digest: replicas that count with another one replay another script."""

    async def advance(
        self, key: str | None, *, session_id: str | None, request: str
    ) -> tuple[int, tuple[str, ...]]:
        """This call's 0-based index in sequence ``key``, and the digests of other scripts
        that counted calls of it. ``request`` identifies what the call asks: a call of
        ``session_id`` asking what the last one asked, whose replica is gone, gets its turn."""
        ...


class _Cursor:
    __slots__ = ("calls", "position", "turns")

    def __init__(self, turns: tuple[CompiledTurn, ...]) -> None:
        self.turns = turns
        self.calls = 0
        """Calls taken here (``calls`` mode, counted in this process)."""
        self.position = 0
        """Turns replayed: one past the furthest this provider served."""


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
        self._counter: CallCounter | None = None

    @property
    def mode(self) -> CursorMode:
        return self._mode

    def count_with(self, counter: CallCounter | None) -> None:
        """Count calls with ``counter`` (on the engine) instead of in this process."""
        self._counter = counter

    def _cursor(self, session_id: str | None) -> tuple[str | None, _Cursor] | NoSession:
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
        return key, cursor

    async def take(
        self, session_id: str | None, *, assistant_turns: int = 0, request: str = ""
    ) -> CompiledTurn | Miss:
        """The turn for a call of ``session_id``.

        ``calls`` mode: the next turn (the cursor moves on; counted on the engine, a call
        repeating ``request`` after its replica is gone gets the same turn again).
        ``transcript`` mode: turn number ``assistant_turns`` (how many assistant messages the
        request holds).
        """
        found = self._cursor(session_id)
        if isinstance(found, NoSession):
            return found
        key, cursor = found
        if self._mode == "transcript":
            index = assistant_turns
        elif self._counter is None:
            index = min(cursor.calls, len(cursor.turns))
            cursor.calls = index + 1
        else:
            index, others = await self._counter.advance(key, session_id=session_id, request=request)
            if others:
                return OtherScripts(key, self._counter.digest, others)
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

    def remaining(self, reached: Mapping[str | None, int] | None = None) -> dict[str | None, int]:
        """Turns not replayed, per cursor key (``None``: the shared or never-used default).

        A turn counts as replayed once it or a later one was served. ``reached`` adds what other
        replicas served (calls counted per sequence on the engine).
        """
        reached = reached or {}
        positions = {key: cursor.position for key, cursor in self._cursors.items()}
        for key, calls in reached.items():
            positions[key] = max(positions.get(key, 0), calls)
        out: dict[str | None, int] = {}
        for key, position in positions.items():
            length = len(self._turns(key))
            if position < length:
                out[key] = length - position
        for session_id, turns in self._keyed.items():
            if session_id not in positions:
                out[session_id] = len(turns)
        if (
            self._default
            and not self._default_used
            and not _default_reached(positions, self._keyed)
        ):
            out[None] = len(self._default)
        return out

    def _turns(self, key: str | None) -> tuple[CompiledTurn, ...]:
        if key is not None and key in self._keyed:
            return self._keyed[key]
        return self._default


def _default_reached(positions: Mapping[str | None, int], keyed: Mapping[str, object]) -> bool:
    return any(key not in keyed for key in positions)
