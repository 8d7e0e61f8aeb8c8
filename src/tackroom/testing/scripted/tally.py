"""The count of calls per sequence, kept in engine state so every replica shares it.

Replicas of one provider (``provider::<name>::stream`` served by several workers: two
``tackroom run`` on one NATS bus, a ``tackroom serve`` beside a ``tackroom worker run scripted``)
take calls of one session in turn. With the count in engine state, whichever replica answers, it
answers with the next turn.

A call that repeats the last call of its session, made by a replica that is gone (no other replica
serves the provider now: its process was killed), gets that call's turn again instead of the next
one: the harness is repeating the step the ended process lost, mid-answer or before the answer was
stored. So ``tackroom run --resume`` of a killed scripted run goes on where the run stood.

Scope :data:`SCOPE`, key ``<provider>/shared`` (the shared sequence) or
``<provider>/session/<session id>``; value ``{"schema_version": 1, "calls": {<digest>: n},
"last": {<digest>: {<session id>: {"replica", "request", "turn"}}}}``, counted per script digest,
so replicas replaying different scripts are caught instead of taking turns from each other's
scripts. Counts of another script whose replicas are all gone (no other replica serves the
provider now) are dropped: that script's process ended, and this one takes the session over.
Each call reads the value and writes it back with compare-and-set: two state round trips.
"""

from __future__ import annotations

import hashlib
import json
import uuid

from pydantic import BaseModel, ConfigDict, Field

from tackroom.contracts.provider import ProviderRequest, stream_function
from tackroom.engine.errors import RevisionConflict
from tackroom.engine.protocol import Engine
from tackroom.testing.scripted.script import Script

__all__ = ["SCOPE", "EngineCounter", "request_digest", "script_digest"]

SCOPE = "scripted-cursors"
SCHEMA_VERSION = 1
_SHARED = "shared"
_SESSION = "session/"
_NO_SESSION = "-"


class _Last(BaseModel):
    """The last call of a session: who answered it, what it asked, which turn it got."""

    model_config = ConfigDict(extra="ignore")

    replica: str
    request: str
    turn: int


class _Tally(BaseModel):
    model_config = ConfigDict(extra="ignore")

    schema_version: int = SCHEMA_VERSION
    calls: dict[str, int] = Field(default_factory=dict)
    last: dict[str, dict[str, _Last]] = Field(default_factory=dict)


def script_digest(script: Script, *, per_session: bool) -> str:
    """What replicas must agree on: the turns, their chunking and how sequences are keyed."""
    data = {
        "turns": [turn.model_dump(mode="json") for turn in script.turns],
        "deltas": script.deltas,
        "argument_deltas": script.argument_deltas,
        "per_session": per_session,
    }
    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def request_digest(request: ProviderRequest) -> str:
    """What a repeated call asks again: the request but its channel (new for every call)."""
    text = request.model_dump_json(exclude={"writer"})
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class EngineCounter:
    """Counts the calls of provider ``provider``'s sequences in engine state."""

    def __init__(self, engine: Engine, *, provider: str, digest: str) -> None:
        self._engine = engine
        self._stream_id = stream_function(provider).id
        self._prefix = f"{provider}/"
        self.digest = digest
        self._replica = uuid.uuid4().hex[:12]
        """This replica, as the calls it answers record it."""

    def _key(self, key: str | None) -> str:
        return self._prefix + (_SHARED if key is None else _SESSION + key)

    async def advance(
        self, key: str | None, *, session_id: str | None, request: str
    ) -> tuple[int, tuple[str, ...]]:
        """The 0-based turn of this call (``request``: its :func:`request_digest`) in sequence
        ``key``, and the digests of other scripts that counted calls of it."""
        while True:
            entry = await self._engine.get_state(SCOPE, self._key(key))
            tally = _Tally.model_validate(entry.value) if entry is not None else _Tally()
            others = tuple(sorted(digest for digest in tally.calls if digest != self.digest))
            alone: bool | None = None  # no other replica serves the provider (None: not asked)
            if others:
                alone = not await self._other_replicas()
            if others and alone:
                # Counts left by replicas that are gone (an earlier process on a persistent
                # engine whose script was another): this script takes the session over.
                for digest in others:
                    tally.calls.pop(digest, None)
                    tally.last.pop(digest, None)
                others = ()
            turn = await self._turn(tally, session_id or _NO_SESSION, request, alone)
            try:
                await self._engine.set_state(
                    SCOPE,
                    self._key(key),
                    tally.model_dump(mode="json"),
                    expected_revision=0 if entry is None else entry.revision,
                )
            except RevisionConflict:
                continue  # another replica counted a call meanwhile: count again
            return turn, others

    async def _turn(self, tally: _Tally, caller: str, request: str, alone: bool | None) -> int:
        """The turn for this call, recorded in ``tally``: the turn of the session's last call
        again when that call was made by a replica that is gone and asked the same; else the
        next turn."""
        calls = tally.last.setdefault(self.digest, {})
        last = calls.get(caller)
        repeat = (
            last is not None
            and last.request == request
            and last.replica != self._replica
            and (alone if alone is not None else not await self._other_replicas())
        )
        if last is not None and repeat:
            turn = last.turn
        else:
            turn = tally.calls.get(self.digest, 0)
            tally.calls[self.digest] = turn + 1
        calls[caller] = _Last(replica=self._replica, request=request, turn=turn)
        return turn

    async def _other_replicas(self) -> bool:
        functions = await self._engine.list_functions()
        return sum(info.function_id == self._stream_id for info in functions) > 1

    async def reached(self) -> dict[str | None, int]:
        """Calls counted per sequence key (``None``: the shared sequence) for this script."""
        out: dict[str | None, int] = {}
        for entry in await self._engine.list_state(SCOPE, prefix=self._prefix):
            calls = _Tally.model_validate(entry.value).calls.get(self.digest, 0)
            name = entry.key[len(self._prefix) :]
            if name == _SHARED:
                out[None] = calls
            elif name.startswith(_SESSION):
                out[name[len(_SESSION) :]] = calls
        return out
