"""One run as the facade follows it: a subscription to the session's events, filtered to the run,
typed, folded into a :class:`~tackroom.harness.result.RunResult`.

The subscription is opened *before* ``run::start`` (from the last sequence this harness saw on
the session), so no event of the run can be missed, and it is closed when the run ends, when the
caller stops iterating, or when the harness closes. Events are handed out through a
:class:`~tackroom.kit.live.LiveFeed`: live deltas as they stream, and — for a run followed after
it started (``Harness.follow``) — a ``message_snapshot`` of an answer already streaming.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, Literal, Protocol

from tackroom.contracts.events import (
    EVENTS,
    AgentEnd,
    AgentEvent,
    ApprovalRequested,
)
from tackroom.contracts.messages import UserMessage
from tackroom.contracts.turn import TurnStateView
from tackroom.engine.protocol import Engine
from tackroom.harness.errors import UsageError
from tackroom.harness.remote import RemoteBus
from tackroom.harness.result import PendingApproval, RunCollector, RunResult
from tackroom.kit.live import LiveFeed
from tackroom.runtime.errors import HarnessError

__all__ = ["ApprovalCallback", "RunHost", "RunStream", "SessionBusy"]

ApprovalCallback = Callable[[PendingApproval], "bool | str | Awaitable[bool | str | None] | None"]
"""Decides a parked call: ``True``/``"allow"`` allows, ``False``/``"deny"`` denies, ``None``
leaves it pending (decide it later with ``harness.approvals.approve``/``deny``)."""

_PARK_SETTLE = 2.0


class RunHost(Protocol):
    """What a run reports to (the harness's :class:`~tackroom.harness.launch.Launcher`)."""

    @property
    def on_approval(self) -> ApprovalCallback | None: ...

    @property
    def bus(self) -> Engine | RemoteBus: ...

    def note_cursor(self, session_id: str, seq: int) -> None:
        """The last sequence seen on a session's events (where the next run subscribes from)."""

    def forget_parked(self, run_id: str) -> None: ...

    async def get_state(self, session: str) -> TurnStateView | None: ...

    async def approve(self, pending: PendingApproval, *, always: bool = False) -> None: ...

    async def deny(self, pending: PendingApproval, *, reason: str | None = None) -> None: ...


class SessionBusy(HarnessError):
    """The session has a run in flight; follow it (``Harness.follow``) or abort it first."""

    def __init__(self, session_id: str, reason: str) -> None:
        super().__init__(
            f"session {session_id} is busy ({reason}): wait for that run with"
            f" `tackroom run --resume {session_id}` / Harness.follow(), or abort it"
        )
        self.session_id = session_id
        self.reason = reason


class RunStream:
    """An async iterator of one run's typed events; :attr:`result` once it stopped."""

    def __init__(self) -> None:
        self._harness: RunHost | None = None
        self._opener: Callable[[], Awaitable[RunStream]] | None = None
        self._subscription: LiveFeed | None = None
        self._collector: RunCollector | None = None
        self.session_id = ""
        self.run_id = ""
        self.ended = False
        self.parked = False
        self._parked_calls: list[PendingApproval] = []
        self._closed = False
        self.seq = 0
        """The stream sequence of the last event handed out (a client's resume cursor)."""
        self.frame: dict[str, Any] = {}
        """The last event as stored (JSON), for a client that forwards it verbatim."""
        self.live = False
        """Whether the last event is live (a delta, a snapshot: never stored; its ``seq`` is the
        stored event before it)."""

    @classmethod
    async def open(
        cls,
        harness: RunHost,
        *,
        session_id: str,
        run_id: str,
        prompt: UserMessage | None,
        after: int,
        snapshots: bool = False,
    ) -> RunStream:
        """``snapshots``: the run may be under way (a follow), so an answer already streaming
        is handed out as a snapshot first; a stream opened before its run starts needs none."""
        stream = cls()
        stream._harness = harness
        stream.session_id, stream.run_id = session_id, run_id
        stream._collector = RunCollector(session_id=session_id, run_id=run_id, prompt=prompt)
        stream._subscription = await LiveFeed.open(
            harness.bus, session_id, after=after, snapshots=snapshots
        )
        return stream

    @classmethod
    def deferred(cls, opener: Callable[[], Awaitable[RunStream]]) -> RunStream:
        """A stream whose run starts on first iteration (``Harness.stream`` is not async)."""
        stream = cls()
        stream._opener = opener
        return stream

    async def _ensure_open(self) -> None:
        if self._opener is None:
            return
        opener, self._opener = self._opener, None
        opened = await opener()
        self._harness, self._subscription = opened._harness, opened._subscription
        self._collector = opened._collector
        self.session_id, self.run_id = opened.session_id, opened.run_id

    def __aiter__(self) -> RunStream:
        return self

    async def __anext__(self) -> AgentEvent:
        await self._ensure_open()
        if self.ended or self._closed:
            raise StopAsyncIteration
        event = await self._next_event()
        if event is None:
            raise StopAsyncIteration
        return event

    async def _next_event(self) -> AgentEvent | None:
        """The next event of this run, typed and folded (``None``: the stream closed)."""
        assert self._subscription is not None
        assert self._harness is not None
        while True:
            try:
                record = await self._subscription.__anext__()
            except StopAsyncIteration:
                await self.aclose()
                return None
            self._harness.note_cursor(self.session_id, record.seq)
            data = record.data
            if not isinstance(data, dict) or data.get("run_id") != self.run_id:
                continue
            self.seq, self.frame, self.live = record.seq, data, record.live
            event = EVENTS.parse(data)
            await self._take(event)
            return event

    async def _take(self, event: AgentEvent) -> None:
        assert self._harness is not None
        assert self._collector is not None
        self._collector.add(event)
        if isinstance(event, ApprovalRequested) and self._harness.on_approval is not None:
            await self._ask(event)
        if isinstance(event, AgentEnd):
            self.ended = True
            await self.aclose()

    async def fold(self, *, return_when_parked: bool) -> None:
        """Follow the run to its end — or, with ``return_when_parked``, until it waits for a
        decision nobody here will make — handing no event out.

        ``Harness.run``'s events reach nobody but its result, so no frame is typed here: the
        collector folds the stored JSON of the few it reads, and the result types its messages
        when they are first read. The loop is the one per-event cost the facade adds over a
        bare client, so it is kept tight: the harness's cursor is noted once, at the end.
        """
        await self._ensure_open()
        assert self._subscription is not None
        assert self._harness is not None
        self.parked = False
        folded, run_id, seq = RunCollector.FOLDED, self.run_id, 0
        collector, asks = self._collector, self._harness.on_approval is not None
        assert collector is not None
        try:
            # Straight from the subscription: a result needs no live event, nor a snapshot.
            async for record in self._subscription.records:
                seq, data = record.seq, record.data
                if type(data) is not dict or data.get("run_id") != run_id:
                    continue
                kind = data.get("type")
                if kind in folded:
                    self.seq, self.frame = seq, data
                    if asks and kind == "approval_requested":
                        await self._take(EVENTS.parse(data))
                    else:
                        collector.add_frame(data, EVENTS.parse)
                    if collector.ended:
                        self.ended = True
                        return
                elif (
                    return_when_parked
                    and kind == "turn_state_changed"
                    and data["data"].get("to") == "function_awaiting_approval"
                    and await self._settle_parked()
                ):
                    self.seq, self.frame = seq, data
                    self.parked = True
                    return
        finally:
            if seq:
                self._harness.note_cursor(self.session_id, seq)
        await self.aclose()

    async def _settle_parked(self) -> bool:
        """The calls the turn parked (from ``turn::get_state``, the committed record)."""
        assert self._harness is not None
        deadline = asyncio.get_running_loop().time() + _PARK_SETTLE
        while True:
            view = await self._harness.get_state(self.session_id)
            if view is None or view.run_id != self.run_id:
                return False
            if view.state == "function_awaiting_approval" and view.awaiting_approval:
                self._parked_calls = [
                    PendingApproval(
                        session_id=self.session_id,
                        run_id=self.run_id,
                        function_call_id=call.function_call_id,
                        function_id=call.function_id,
                        arguments=call.arguments,
                        reason=self._reason_of(call.function_call_id),
                    )
                    for call in view.awaiting_approval
                ]
                return True
            if view.state != "function_execute" or asyncio.get_running_loop().time() > deadline:
                return False
            await asyncio.sleep(0.01)

    def _reason_of(self, call_id: str) -> str:
        assert self._collector is not None
        known = self._collector.pending.get(call_id)
        return known.reason if known is not None else ""

    async def _ask(self, event: ApprovalRequested) -> None:
        assert self._harness is not None
        assert self._harness.on_approval is not None
        pending = PendingApproval.of(event)
        callback = self._harness.on_approval
        if inspect.iscoroutinefunction(callback):
            answer = await callback(pending)
        else:
            answer = await asyncio.to_thread(callback, pending)
            if inspect.isawaitable(answer):
                answer = await answer
        decision = _decision(answer)
        if decision == "allow":
            await self._harness.approve(pending)
        elif decision == "deny":
            await self._harness.deny(pending, reason="denied by the application")

    @property
    def result(self) -> RunResult[Any]:
        if self._collector is None:
            raise RuntimeError("the run has not started: iterate the stream first")
        result = self._collector.result()
        if not self.ended:
            result.pending = list(self._parked_calls) or result.pending
        return result

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        subscription, self._subscription = self._subscription, None
        if subscription is not None:
            await subscription.aclose()
        if self._harness is not None:
            self._harness.forget_parked(self.run_id)


def _decision(answer: Any) -> Literal["allow", "deny"] | None:
    if answer is True or answer == "allow":
        return "allow"
    if answer is False or answer == "deny":
        return "deny"
    if answer is None:
        return None
    raise UsageError(
        f"on_approval answered {answer!r}: answer True or 'allow', False or 'deny', or None to"
        " leave the call pending"
    )
