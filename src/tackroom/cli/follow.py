"""Showing a run in the terminal: its events, its approval prompts, and never waiting forever.

:func:`show_run` renders one :class:`RunStream` through a :class:`TerminalView` and asks on the
terminal when a call needs approval. Without a terminal to ask on (stdin is not a TTY), a run
that parks for approval is not waited on forever: after ``approval_timeout`` seconds (default 0)
with no decision from elsewhere (``tackroom approve`` in another terminal), it returns
:data:`EXIT_AWAITING_APPROVAL` and prints the calls waiting and the lines that decide them and
finish the run. ``tackroom run`` and ``tackroom chat`` use it.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable

from tackroom.contracts.events import (
    AgentEnd,
    AgentEvent,
    ApprovalRequested,
    ApprovalResolved,
    TurnStateChanged,
)
from tackroom.contracts.turn import TurnStateView
from tackroom.engine.errors import EngineError
from tackroom.harness import Harness, PendingApproval, RunStream
from tackroom.harness.terminal import TerminalView, clip

__all__ = ["EXIT_AWAITING_APPROVAL", "Parked", "Prompts", "awaiting", "read_line", "show_run"]

EXIT_AWAITING_APPROVAL = 3
"""``tackroom run``'s exit code when the run waits for an approval nobody here can give."""

_PARKED = "function_awaiting_approval"
_SETTLE = 0.05
"""Seconds between looks at a turn that is parking its calls (its record not yet committed)."""


Parked = Callable[[TurnStateView, TerminalView, float], None]
"""Says which calls of a parked run wait and how to decide them."""


async def show_run(
    harness: Harness,
    stream: RunStream,
    view: TerminalView,
    *,
    approval_timeout: float | None = None,
    ask: bool | None = None,
    parked: Parked | None = None,
) -> int:
    """Show ``stream`` to its end; the exit code (0 a normal end, 1 not, 3 waiting for approval
    and not asking). ``ask``: ask on the terminal (default: when stdin is one); otherwise wait
    ``approval_timeout`` seconds (default 0) for a decision from elsewhere, then return 3 after
    ``parked`` (default: the ``tackroom approve`` lines) said what waits."""
    asks = sys.stdin.isatty() if ask is None else ask
    patience = None if asks else (approval_timeout or 0.0)
    async with Prompts(harness, view, asks=asks) as prompts:
        shown = _Shown(harness, stream, view, prompts, patience=patience, say=parked or _awaiting)
        return await shown.to_end()


class _Shown:
    """One run being shown; with ``patience``, a park for approval is waited on that long."""

    def __init__(
        self,
        harness: Harness,
        stream: RunStream,
        view: TerminalView,
        prompts: Prompts,
        *,
        patience: float | None,
        say: Parked,
    ) -> None:
        self._harness, self._stream, self._view, self._prompts = harness, stream, view, prompts
        self._patience, self._say = patience, say
        self._loop = asyncio.get_running_loop()
        self._deadline: float | None = None

    async def to_end(self) -> int:
        events = aiter(self._stream)
        upcoming: asyncio.Future[AgentEvent] = asyncio.ensure_future(anext(events))
        try:
            while True:
                deadline = self._deadline
                wait = None if deadline is None else max(0.0, deadline - self._loop.time())
                done, _ = await asyncio.wait({upcoming}, timeout=wait)
                if not done:
                    code = await self._waited()
                else:
                    try:
                        event = upcoming.result()
                    except StopAsyncIteration:
                        return 1
                    upcoming = asyncio.ensure_future(anext(events))
                    code = self._show(event)
                if code is not None:
                    return code
        finally:
            upcoming.cancel()
            await asyncio.gather(upcoming, return_exceptions=True)

    def _show(self, event: AgentEvent) -> int | None:
        stream, patience = self._stream, self._patience
        self._prompts.seen(event)
        self._view.show(event, seq=stream.seq, live=stream.live, frame=stream.frame)
        if isinstance(event, AgentEnd):
            return self._view.finish(stream.result)
        if patience is not None and isinstance(event, TurnStateChanged):
            parked = event.data.to == _PARKED
            self._deadline = self._loop.time() + patience if parked else None
        elif patience and isinstance(event, ApprovalRequested):
            self._view.note(
                f"{event.data.function_id} waits for approval: waiting up to {patience:g}s for"
                f" `tackroom approve {stream.session_id} {event.data.function_call_id}` (or deny)"
                " in another terminal"
            )
        return None

    async def _waited(self) -> int | None:
        """No decision came in time: :data:`EXIT_AWAITING_APPROVAL` if the turn's record says
        it waits (after saying what), else look again shortly or not at all."""
        assert self._patience is not None
        state = await self._harness.get_state(self._stream.session_id)
        self._deadline = _next_look(state, self._stream.run_id, self._loop.time())
        if self._deadline is None and state is not None and _parked(state, self._stream.run_id):
            self._say(state, self._view, self._patience)
            return EXIT_AWAITING_APPROVAL
        return None


def _parked(state: TurnStateView, run_id: str) -> bool:
    return state.run_id == run_id and state.state == _PARKED and bool(state.awaiting_approval)


def _next_look(state: TurnStateView | None, run_id: str, now: float) -> float | None:
    """When to look again at a turn still parking its calls; ``None``: no need to."""
    if state is not None and state.run_id == run_id and state.state == "function_execute":
        return now + _SETTLE
    return None


def awaiting(*, options: str = "") -> Parked:
    """What ``tackroom run`` says of a parked run: the calls and the command lines that decide
    them, then the line that finishes the run (``tackroom run --resume SESSION`` + ``options``,
    the run's own model options)."""

    def say(state: TurnStateView, view: TerminalView, patience: float) -> None:
        _awaiting(state, view, patience)
        view.note(f"  tackroom run --resume {state.session_id}{options}")

    return say


def _awaiting(state: TurnStateView, view: TerminalView, patience: float) -> None:
    """Say which calls wait and the command lines that decide them."""
    session = state.session_id
    waited = f" (none came within {patience:g}s)" if patience else ""
    calls = state.awaiting_approval
    view.note(
        f"{session} waits for approval of {len(calls)} call(s); there is no terminal to ask on"
        f"{waited}. Decide each, then finish the run:"
    )
    for call in calls:
        arguments = clip(json.dumps(call.arguments, ensure_ascii=False), 120)
        view.note(f"  {call.function_id} {arguments}")
        view.note(f"    tackroom approve {session} {call.function_call_id}")
        view.note(f'    tackroom deny {session} {call.function_call_id} --reason "…"')


class Prompts:
    """The approval prompts of one run, each a task this object owns.

    A prompt does not hold up the event stream, and one whose call is decided elsewhere (another
    terminal, an expiry) is withdrawn at once rather than after Enter. One prompt at a time.
    Without a terminal (``asks`` false) nothing is asked: :func:`show_run` says what to run.
    """

    def __init__(self, harness: Harness, view: TerminalView, *, asks: bool = True) -> None:
        self._harness = harness
        self._view = view
        self._asks = asks
        self._open: dict[str, asyncio.Task[None]] = {}
        self._turn = asyncio.Lock()

    async def __aenter__(self) -> Prompts:
        return self

    async def __aexit__(self, *_: object) -> None:
        tasks = list(self._open.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def seen(self, event: AgentEvent) -> None:
        if isinstance(event, ApprovalRequested):
            pending = PendingApproval.of(event)
            call_id = pending.function_call_id
            if self._asks:
                self._open[call_id] = asyncio.create_task(self._ask(pending))
                self._open[call_id].add_done_callback(lambda _: self._open.pop(call_id, None))
        elif isinstance(event, ApprovalResolved):
            task = self._open.get(event.data.function_call_id)
            if task is not None and not task.done():
                task.cancel()
                self._view.note("")  # end the withdrawn prompt's line

    async def _ask(self, pending: PendingApproval) -> None:
        async with self._turn:
            await ask_approval(self._harness, pending, self._view)


async def ask_approval(harness: Harness, pending: PendingApproval, view: TerminalView) -> None:
    """Ask on the terminal: y (allow), n (deny, the default), a (allow for the whole session)."""
    function_id = pending.function_id
    answer = await read_line(
        f"allow {function_id} {json.dumps(pending.arguments, ensure_ascii=False)}? [y/N/a=always] "
    )
    choice = answer.strip().lower()
    always = choice in ("a", "always")
    try:
        if always or choice in ("y", "yes"):
            await harness.approvals.approve(pending, always=always)
        else:
            await harness.approvals.deny(pending)
    except (EngineError, RuntimeError) as exc:  # expired, decided elsewhere meanwhile, ...
        view.note(f"the decision was not recorded: {exc}")
        return
    if always:
        view.note(f"{function_id} is allowed for the rest of the session")


async def read_line(prompt: str) -> str:
    """A line from stdin read through the event loop, so waiting for it can be cancelled
    (``input()`` in a thread cannot be). An empty string at the end of input."""
    sys.stderr.write(prompt)
    sys.stderr.flush()
    loop = asyncio.get_running_loop()
    line: asyncio.Future[str] = loop.create_future()
    fd = sys.stdin.fileno()

    def readable() -> None:
        if not line.done():
            line.set_result(sys.stdin.readline())

    loop.add_reader(fd, readable)
    try:
        return await line
    finally:
        loop.remove_reader(fd)
