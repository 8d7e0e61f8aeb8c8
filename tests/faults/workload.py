"""Child process of the fault suite: a harness running multi-tool turns, to be killed at will.

    python -m tests.faults.workload ENGINE_URL WORKDIR turn --phase first|resume [--after SEQ]
    python -m tests.faults.workload ENGINE_URL WORKDIR loop --sessions N [--concurrency C]
    python -m tests.faults.workload ENGINE_URL WORKDIR serve

It is a ``tackroom.Harness`` (booting what ``tackroom run`` boots, plus the scripted provider
with a per-session, transcript-cursor script and the test tools of ``tests/turn/harness.py``,
whose side effects are lines in ``WORKDIR/side_effects.log``, outside tackroom). Every run is
:data:`SCRIPT`: the model thinks (``--think`` seconds before each answer), calls two
non-idempotent ``test::record`` and one idempotent ``test::touch``, then one more
``test::record``, then answers. The tools linger ``--linger`` seconds after their side effect,
so a kill can land between a side effect and its result.

- ``turn``: one session (:data:`SESSION`, run :data:`RUN_ID`). The ``first`` phase starts the
  run; ``resume`` only boots, and the orchestrator wakes the run. Both follow the session's
  ``agent::events`` from ``--after`` and print each record, then the final turn state. The
  parent SIGKILLs the first phase at a random instant.
- ``loop``: ``--sessions`` sessions ``s0…``, ``--concurrency`` at a time, each one run
  ``run-<session>``; a start or a poll that fails while the bus is away (NATS restarted) is
  retried with the same run id (a repeated start resumes that run), so the loop rides through
  outages and reports each run's end (or that it did not end within ``--timeout`` seconds).
- ``serve``: boots and waits for SIGTERM (a harness process for other processes' runs).

Everything goes to stdout as JSON lines, flushed one by one: ``{"marker": "booted"}`` once the
harness is up, ``{"marker": "started"}``, ``{"event": {...}}``, ``{"marker": "finished",
"session", "state", "stop_reason", "provider"?}``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from tackroom import Harness, RunStream
from tackroom.contracts.events import EVENTS
from tackroom.contracts.tools import CallContext
from tackroom.contracts.turn import TurnStateView
from tackroom.engine import EngineError, open_engine
from tackroom.testing.scripted import status_function
from tests.turn.harness import RECORD, TOUCH, RecordTools, harness_config

__all__ = [
    "CALLS",
    "EXPECTED_ROLES",
    "IDEMPOTENT",
    "PROMPT",
    "RUN_ID",
    "SESSION",
    "SIDE_EFFECTS",
    "expected_entries",
    "script",
]

SESSION = "fault-session"
RUN_ID = "run-fault"
SIDE_EFFECTS = "side_effects.log"
PROMPT = "Please record the notes n1 to n4."
ANSWER = "Recorded n1, n2, n3 and n4."

CALLS: list[tuple[str, str, str]] = [
    ("rec-1", RECORD, "n1"),
    ("rec-2", RECORD, "n2"),
    ("tch-3", TOUCH, "n3"),
    ("rec-4", RECORD, "n4"),
]
"""Every tool call of a run: (call id, function, note)."""
IDEMPOTENT = {call_id for call_id, function, _ in CALLS if function == TOUCH}


def _call(index: int) -> dict[str, Any]:
    call_id, function, note = CALLS[index]
    return {"function_id": function, "arguments": {"note": note}, "id": call_id}


def script(think: float) -> list[dict[str, Any]]:
    """The model of every run: three calls, one call, an answer (transcript cursor)."""
    pace = {"delay": think, "delay_between_frames": 0.002} if think else {}
    return [
        {
            "text": "I will record the first three notes.",
            "tool_calls": [_call(0), _call(1), _call(2)],
            "expect": {"last_user_contains": "n1 to n4", "last_role": "user"},
            **pace,
        },
        {
            "text": "And the last one.",
            "tool_calls": [_call(3)],
            "expect": {"has_function_result_for": "tch-3", "last_role": "function_result"},
            **pace,
        },
        {"text": ANSWER, "expect": {"has_function_result_for": "rec-4"}, **pace},
    ]


def expected_entries(run_id: str) -> list[tuple[str, str]]:
    """``(entry_id, role)`` of the session's active path after one uninterrupted run."""
    return [
        (f"{run_id}-m0", "user"),
        (f"{run_id}-t1-a", "assistant"),
        (f"{run_id}-fr-rec-1", "function_result"),
        (f"{run_id}-fr-rec-2", "function_result"),
        (f"{run_id}-fr-tch-3", "function_result"),
        (f"{run_id}-t2-a", "assistant"),
        (f"{run_id}-fr-rec-4", "function_result"),
        (f"{run_id}-t3-a", "assistant"),
    ]


EXPECTED_ROLES = expected_entries(RUN_ID)


class LingeringTools(RecordTools):
    """The test tools, each call lingering ``linger`` seconds after its side effect."""

    def __init__(self, path: Path, linger: float) -> None:
        super().__init__(path)
        self.linger = linger

    def _handler(self, function_id: str) -> Callable[[Any, CallContext | None], Awaitable[Any]]:
        handle = super()._handler(function_id)

        async def lingering(request: Any, call: CallContext | None) -> Any:
            result = await handle(request, call)
            if self.linger:
                await asyncio.sleep(self.linger)
            return result

        return lingering


def emit(item: Mapping[str, Any]) -> None:
    print(json.dumps(item, ensure_ascii=False), flush=True)


def build(url: str, workdir: Path, *, think: float, linger: float) -> Harness:
    tools = LingeringTools(workdir / SIDE_EFFECTS, linger)
    config = harness_config(workdir, scripted={"cursor": "transcript", "per_session": True})
    return Harness(
        "scripted:fault-model",
        config=config,
        engine=open_engine(url),
        script=script(think),
        tools=["test::*"],
        workers=[tools.worker_spec()],
    )


# -- turn ------------------------------------------------------------------------------------------
def _emit_event(seq: int, event: Mapping[str, Any]) -> None:
    emit(
        {
            "event": {
                "seq": seq,
                "type": event["type"],
                "event_id": event["event_id"],
                "run_id": event["run_id"],
                "session_id": event["session_id"],
                "data": event["data"],
            }
        }
    )


async def _pump(stream: RunStream, last: list[int]) -> None:
    """The stored events the client is served (a live delta or snapshot is no stored record)."""
    async for _ in stream:
        if not stream.live:
            _emit_event(stream.seq, stream.frame)
            last[0] = stream.seq


async def _terminal(harness: Harness, session: str, *, timeout: float) -> TurnStateView:
    """The session's turn once committed ``stopped`` or ``failed``, riding through a bus that is
    away for a while."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            view = await harness.get_state(session)
        except (EngineError, TimeoutError):
            view = None
        if view is not None and view.state in ("stopped", "failed"):
            return view
        if time.monotonic() > deadline:
            raise TimeoutError(f"the run of {session} did not end within {timeout} s: {view}")
        await asyncio.sleep(0.05)


ANNOUNCE_TIMEOUT = 10.0
"""Seconds a loop waits, once a run's end is committed, for its ``agent_end`` to be stored: the
delivery that committed it applies it just after, and closing the harness in between would cut
the announcement short (the next start announces it; this process is the last)."""


async def _announced(harness: Harness, session: str, *, timeout: float) -> None:
    """Return once the session's ``agent_end`` is stored, as a client following it would."""
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(EngineError, TimeoutError):
            records = await harness.engine.read(EVENTS.name, session, after=0, limit=100_000)
            if any(r.data.get("type") == "agent_end" for r in records):
                return
        if time.monotonic() > deadline:
            raise TimeoutError(f"the end of {session} was committed but not announced")
        await asyncio.sleep(0.05)


async def turn(harness: Harness, *, first: bool, after: int) -> None:
    """Follow the run like a client (from ``after``) until its end is committed. A resumed
    client whose cursor already holds ``agent_end`` would wait for nothing: once the end is
    committed, what the stream has not yet served is read from the engine instead. A resumed
    client that finds no run starts it (the harness before it died before starting it)."""
    if first or await harness.get_state(SESSION) is None:
        # (a harness killed before its run::start committed left no run: start it again, as
        # its user would — the run id makes the start idempotent)
        reply = await harness.submit(PROMPT, session=SESSION, run_id=RUN_ID)
        if not reply.started:
            raise RuntimeError(f"run::start refused: {reply.reason}")
        emit({"marker": "started"})
    last = [after]
    stream = await harness.follow(SESSION, after=after)
    pump = asyncio.create_task(_pump(stream, last))
    try:
        view = await _terminal(harness, SESSION, timeout=60)
        with contextlib.suppress(TimeoutError):
            await _announced(harness, SESSION, timeout=ANNOUNCE_TIMEOUT)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(pump), 3)
    finally:
        pump.cancel()
        await asyncio.gather(pump, return_exceptions=True)
        await stream.aclose()
    for record in await harness.engine.read(EVENTS.name, SESSION, after=last[0], limit=100_000):
        _emit_event(record.seq, record.data)
    status = await harness.bus.trigger(status_function("scripted"), {})
    emit(
        {
            "marker": "finished",
            "session": SESSION,
            "state": view.state,
            "stop_reason": view.stop_reason,
            "provider": status,
        }
    )


# -- loop ------------------------------------------------------------------------------------------
async def _start(harness: Harness, session: str, *, timeout: float) -> int:
    """Start the session's run, retrying a start the bus could not answer; the attempts."""
    deadline = time.monotonic() + timeout
    attempts = 0
    while True:
        attempts += 1
        try:
            reply = await harness.submit(PROMPT, session=session, run_id=f"run-{session}")
        except (EngineError, TimeoutError):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)
            continue
        if not reply.started:
            raise RuntimeError(f"run::start of {session} refused: {reply.reason}")
        return attempts


async def loop(harness: Harness, *, sessions: int, concurrency: int, timeout: float) -> None:
    gate = asyncio.Semaphore(concurrency)

    async def one(index: int) -> None:
        session = f"s{index}"
        async with gate:
            attempts = await _start(harness, session, timeout=timeout)
            try:
                view = await _terminal(harness, session, timeout=timeout)
                await _announced(harness, session, timeout=ANNOUNCE_TIMEOUT)
            except TimeoutError as exc:  # a stranded run: said, and counted by the parent
                emit({"marker": "finished", "session": session, "timed_out": str(exc)})
                return
        emit(
            {
                "marker": "finished",
                "session": session,
                "state": view.state,
                "stop_reason": view.stop_reason,
                "start_attempts": attempts,
            }
        )

    async with asyncio.TaskGroup() as group:
        for index in range(sessions):
            group.create_task(one(index))


# -- main ------------------------------------------------------------------------------------------
async def main(args: argparse.Namespace) -> None:
    harness = build(args.url, args.workdir, think=args.think, linger=args.linger)
    async with harness:
        emit({"marker": "booted"})
        if args.mode == "turn":
            await turn(harness, first=args.phase == "first", after=args.after)
        elif args.mode == "loop":
            await loop(
                harness,
                sessions=args.sessions,
                concurrency=args.concurrency,
                timeout=args.timeout,
            )
        else:
            stop = asyncio.Event()
            loop_ = asyncio.get_running_loop()
            for signum in (signal.SIGTERM, signal.SIGINT):
                loop_.add_signal_handler(signum, stop.set)
            await stop.wait()


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("url")
    parser.add_argument("workdir", type=Path)
    parser.add_argument("mode", choices=["turn", "loop", "serve"])
    parser.add_argument("--phase", choices=["first", "resume"], default="first")
    parser.add_argument("--after", type=int, default=0)
    parser.add_argument("--sessions", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--think", type=float, default=0.02, help="seconds before each answer")
    parser.add_argument("--linger", type=float, default=0.02, help="seconds after a side effect")
    return parser.parse_args(argv)


if __name__ == "__main__":
    asyncio.run(main(_parse(sys.argv[1:])))
