"""Abort requests, known to the driver without a state read per step.

``run::abort`` writes the request to ``turn-abort/<session>`` (durable: a delivery that starts
later, in any process, reads it once) and publishes a live notice — the session and run, no
reason text, never stored — on ``turn::aborts``. Every orchestrator process follows that stream
into an in-memory :class:`AbortWatch`, so a step boundary or a streaming model call in whichever
process drives the session learns of the abort from memory; the reason is read from the state
only when an abort is acted on. A notice that arrives after the step began is seen at the next
boundary, or within the streaming poll while the model answers; one a process missed (it was
not following yet) is read from the state when its next delivery starts.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict

from pydantic import BaseModel, ConfigDict

from tackroom.contracts.bus import Stream
from tackroom.engine.errors import EngineClosed, EngineError
from tackroom.engine.protocol import Engine

__all__ = ["ABORTS", "ABORT_SCOPE", "AbortNotice", "AbortWatch"]

ABORT_SCOPE = "turn-abort"
"""Key = session id, value ``{"run_id", "reason"}``: a request to abort that run."""

_ALL = "all"
_KNOWN_SESSIONS = 10_000
_RETRY_FIRST = 0.5
_RETRY_MAX = 10.0

_log = logging.getLogger("tackroom.orchestrator")


class AbortNotice(BaseModel):
    model_config = ConfigDict(extra="ignore")

    schema_version: int = 1
    session_id: str
    run_id: str


ABORTS: Stream[AbortNotice] = Stream("turn::aborts", AbortNotice)
"""One group (``all``) of live notices: every abort request, heard by every orchestrator."""


class AbortWatch:
    """Which runs have an abort requested, as far as this process has heard."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._runs: OrderedDict[str, str] = OrderedDict()  # session id -> run id
        self.following = asyncio.Event()

    async def request(self, session_id: str, run_id: str, reason: str | None) -> None:
        """Record the request durably, then tell every process driving turns."""
        await self._engine.set_state(ABORT_SCOPE, session_id, {"run_id": run_id, "reason": reason})
        self.note(session_id, run_id)
        notice = AbortNotice(session_id=session_id, run_id=run_id)
        await self._engine.publish(ABORTS.name, _ALL, ABORTS.dump_event(notice))

    async def load(self, session_id: str) -> None:
        """Read the durable request once (a delivery's start: it may predate this process)."""
        entry = await self._engine.get_state(ABORT_SCOPE, session_id)
        if entry is not None and isinstance(entry.value, dict):
            self.note(session_id, str(entry.value.get("run_id")))

    def note(self, session_id: str, run_id: str) -> None:
        self._runs[session_id] = run_id
        self._runs.move_to_end(session_id)
        while len(self._runs) > _KNOWN_SESSIONS:  # sessions other processes drive, long ended
            self._runs.popitem(last=False)

    def requested(self, session_id: str, run_id: str) -> bool:
        return self._runs.get(session_id) == run_id

    def forget(self, session_id: str) -> None:
        """The session's run ended here: its request needs no more watching."""
        self._runs.pop(session_id, None)

    async def reason(self, session_id: str, run_id: str) -> str | None:
        """The reason of an abort requested for ``run_id`` (one state read), else ``None``."""
        if not self.requested(session_id, run_id):
            return None
        entry = await self._engine.get_state(ABORT_SCOPE, session_id)
        if entry is None or not isinstance(entry.value, dict):
            return None
        if entry.value.get("run_id") != run_id:
            return None
        return str(entry.value.get("reason") or "aborted")

    async def follow(self) -> None:
        """Note every notice as it is published (run by the worker for its lifetime);
        :attr:`following` is set once notices are heard.

        An engine that goes away ends the subscription; it is opened again once the engine
        answers (a notice published meanwhile is read from the state when a delivery starts).
        """
        pause = _RETRY_FIRST
        while True:
            try:
                subscription = await ABORTS.subscribe(self._engine, _ALL)
                self.following.set()
                try:
                    async for record in subscription:
                        pause = _RETRY_FIRST
                        notice = ABORTS.parse(record.data)
                        self.note(notice.session_id, notice.run_id)
                finally:
                    self.following.clear()
                    await subscription.aclose()
            except EngineClosed:
                return
            except EngineError as exc:
                _log.warning("abort notices: %s; following again in %.1fs", exc, pause)
            await asyncio.sleep(pause)
            pause = min(pause * 2, _RETRY_MAX)
