"""The count of calls per sequence, kept in engine state so every replica shares it.

Replicas of one provider (``provider::<name>::stream`` served by several workers: two
``tackroom run`` on one NATS bus, a ``tackroom serve`` beside a ``tackroom worker run scripted``)
take calls of one session in turn. With the count in engine state, each call advances it with one
atomic ``update_state`` (one round trip per model call, none per frame), so whichever replica
answers, it answers with the next turn.

Scope :data:`SCOPE`, key ``<provider>/shared`` (the shared sequence) or
``<provider>/session/<session id>``; value ``{"schema_version": 1, "calls": {<digest>: n}}``,
counted per script digest, so replicas replaying different scripts are caught instead of taking
turns from each other's scripts. Counts of another script whose replicas are all gone (no other
replica serves the provider now) are dropped: that script's process ended, and this one takes
the session over.
"""

from __future__ import annotations

import hashlib
import json

from pydantic import BaseModel, ConfigDict

from tackroom.contracts.provider import stream_function
from tackroom.engine.protocol import Engine, UpdateOp
from tackroom.testing.scripted.script import Script

__all__ = ["SCOPE", "EngineCounter", "script_digest"]

SCOPE = "scripted-cursors"
SCHEMA_VERSION = 1
_SHARED = "shared"
_SESSION = "session/"


class _Tally(BaseModel):
    model_config = ConfigDict(extra="ignore")

    schema_version: int = SCHEMA_VERSION
    calls: dict[str, int]


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


class EngineCounter:
    """Counts the calls of provider ``provider``'s sequences in engine state."""

    def __init__(self, engine: Engine, *, provider: str, digest: str) -> None:
        self._engine = engine
        self._stream_id = stream_function(provider).id
        self._prefix = f"{provider}/"
        self.digest = digest
        self._ops: list[UpdateOp] = [
            {"op": "set", "path": ["schema_version"], "value": SCHEMA_VERSION},
            {"op": "increment", "path": ["calls", digest], "value": 1},
        ]

    def _key(self, key: str | None) -> str:
        return self._prefix + (_SHARED if key is None else _SESSION + key)

    async def advance(self, key: str | None) -> tuple[int, tuple[str, ...]]:
        entry = await self._engine.update_state(SCOPE, self._key(key), self._ops)
        calls = _Tally.model_validate(entry.value).calls
        others = tuple(sorted(digest for digest in calls if digest != self.digest))
        if others and not await self._other_replicas():
            # Counts left by replicas that are gone (an earlier process on a persistent engine
            # whose script was another): this script takes the session over.
            drop: list[UpdateOp] = [{"op": "remove", "path": ["calls", d]} for d in others]
            await self._engine.update_state(SCOPE, self._key(key), drop)
            others = ()
        return calls[self.digest] - 1, others

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
