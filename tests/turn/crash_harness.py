"""Child process of the crash matrix: a harness that starts or resumes a scripted turn.

    python -m tests.turn.crash_harness ENGINE_URL WORKDIR --case NAME --phase first|resume
                                       [--after SEQ]

It is a ``tackroom.Harness`` (booting what ``tackroom run`` boots: engine, sessions, orchestrator,
files, utilities, the ``scripted`` provider with ``cursor: transcript``) plus the test tools, on
the engine at ``ENGINE_URL``. The ``first`` phase queues a steering message, starts the run
(``Harness.submit``) and, for the case's kill point, **holds** the harness there: a held
function call blocks forever (and says so), the tool blocks after its side effect, or the model
stream stalls. The parent then kills it with SIGKILL. The ``resume`` phase only boots: the
orchestrator wakes the run, which must complete. Both phases follow the run with
``Harness.follow(session, after=--after)``.

Everything goes to stdout as JSON lines, flushed one by one:

- ``{"event": {"seq", "type", "event_id", "run_id", "data", "live"}}``: each ``agent::events``
  record of the session after ``--after`` (a client reconnecting from that cursor), as stored,
  and the live events (deltas, a snapshot) it was handed meanwhile (``live``: true);
- ``{"marker": "hold", "name": ...}``: the harness reached the kill point;
- ``{"marker": "started"}``: ``run::start`` returned;
- ``{"marker": "finished", "state", "stop_reason", "provider"}``: the run ended and its record is
  committed; ``provider`` is the scripted provider's status (violations).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tackroom import Harness, RunStream
from tackroom.contracts.messages import UserMessage
from tackroom.engine import open_engine
from tackroom.testing.scripted import status_function

from .harness import (
    RECORD,
    TOUCH,
    Hold,
    RecordTools,
    harness_config,
    install_holds,
    wait_for_terminal,
)

__all__ = ["CALL_ID", "CASES", "RUN_ID", "SESSION", "SIDE_EFFECTS", "STEERING", "KillPoint"]

SESSION = "crash-session"
RUN_ID = "run-crash"
CALL_ID = "rec-1"
SIDE_EFFECTS = "side_effects.log"
PROMPT = "Please record the note n1."
STEERING = "Also mention n2 in your answer."


def _appends(suffix: str) -> Callable[[Any], bool]:
    def match(payload: Any) -> bool:
        entries = payload.get("entries", []) if isinstance(payload, dict) else []
        return any(str(e.get("entry_id", "")).endswith(suffix) for e in entries)

    return match


def _inbox(name: str) -> Callable[[Any], bool]:
    return lambda payload: isinstance(payload, dict) and payload.get("name") == name


@dataclass(frozen=True, slots=True)
class KillPoint:
    """Where the first phase is killed, and what the parent expects to find then and after."""

    name: str
    kill_on: frozenset[str]
    """Event types and markers the parent waits for (all of them) before SIGKILL; empty: the run
    is not killed (the uninterrupted baseline)."""
    holds: tuple[Hold, ...] = ()
    tool: str = RECORD
    stall_stream: bool = False
    """The first model turn streams a few frames, then hangs."""
    block_tool: bool = False
    """The tool blocks after writing its side effect."""
    state_at_kill: str | None = None
    """The committed turn state the killed harness left (``None``: not checked)."""
    state_at_kill_atomic: str | None = None
    """The same on a backend whose transactions are atomic (embedded), where a step's record
    commits together with its effects: killed while applying them, the step never committed
    (``None``: as ``state_at_kill``)."""
    ledger_at_kill: str | None = None
    """The call's ledger status the killed harness left (``None``: no entry)."""
    steering_waiting_at_kill: bool = True
    side_effects: int = 1
    """Lines in the side-effect file at the end: how often the tool really ran."""
    outcome_unknown: bool = False
    """The model is told the call's outcome is unknown (a started non-idempotent call)."""


CASES: dict[str, KillPoint] = {
    case.name: case
    for case in [
        KillPoint("uninterrupted", frozenset(), steering_waiting_at_kill=False),
        KillPoint(
            "inside_run_start",
            frozenset({"hold"}),
            holds=(Hold("prompt append", "session-tree::append_batch", _appends("-m0")),),
            # Provisioning committed with the prompt in its outbox, not yet applied.
            state_at_kill="assistant_streaming",
            state_at_kill_atomic="provisioning",
        ),
        KillPoint(
            "after_run_start",
            frozenset({"started", "hold"}),
            holds=(Hold("turn::step", "turn::step"),),
            state_at_kill="provisioning",
        ),
        KillPoint(
            "after_provisioning",
            frozenset({"started", "turn_state_changed", "hold"}),
            holds=(Hold("model call", "provider::scripted::stream"),),
            state_at_kill="assistant_streaming",
        ),
        KillPoint(
            "mid_stream",
            frozenset({"started", "message_update"}),
            stall_stream=True,
            state_at_kill="assistant_streaming",
        ),
        KillPoint(
            "tool_started",
            frozenset({"function_execution_start", "hold"}),
            block_tool=True,
            state_at_kill="function_execute",
            ledger_at_kill="started",
            outcome_unknown=True,
        ),
        KillPoint(
            "idempotent_tool_started",
            frozenset({"function_execution_start", "hold"}),
            tool=TOUCH,
            block_tool=True,
            state_at_kill="function_execute",
            ledger_at_kill="started",
            side_effects=2,
        ),
        KillPoint(
            "tool_finished",
            frozenset({"function_execution_end", "hold"}),
            holds=(Hold("result append", "session-tree::append_batch", _appends(f"fr-{CALL_ID}")),),
            # The batch committed together with the steering check that follows it (which took
            # the steering message), its result in the outbox, not yet applied.
            state_at_kill="assistant_streaming",
            state_at_kill_atomic="function_execute",
            ledger_at_kill="done",
        ),
        KillPoint(
            "before_steering",
            frozenset({"function_execution_end", "hold"}),
            holds=(Hold("steering read", "session-inbox::peek", _inbox("steering")),),
            # The steering check is read before the batch commits: nothing is committed yet,
            # and the resumed batch is answered from the ledger.
            state_at_kill="function_execute",
            ledger_at_kill="done",
        ),
        KillPoint(
            "steering_taken",
            frozenset({"hold"}),
            holds=(Hold("steering append", "session-tree::append_batch", _appends("t1-in0")),),
            state_at_kill="assistant_streaming",
            state_at_kill_atomic="function_execute",
            ledger_at_kill="done",
        ),
        KillPoint(
            "steering_committed",
            frozenset({"hold"}),
            holds=(Hold("steering removal", "session-inbox::remove", _inbox("steering")),),
            state_at_kill="assistant_streaming",
            ledger_at_kill="done",
        ),
    ]
}


def script_turns(case: KillPoint, *, first: bool) -> list[dict[str, Any]]:
    """The model: call the case's tool, then answer with the steering message taken into
    account. ``transcript`` cursor: the request's assistant messages pick the turn."""
    call = {"function_id": case.tool, "arguments": {"note": "n1"}, "id": CALL_ID}
    opening: dict[str, Any] = {
        "text": "I will record the note now.",
        "tool_calls": [call],
        "expect": {"last_user_contains": "n1", "last_role": "user"},
    }
    if first and case.stall_stream:
        # Three text deltas, paced past the orchestrator's 50 ms coalescing, then silence.
        opening |= {"delay_between_frames": 0.06, "stall_after_frames": 3}
    closing = {
        "text": "Recorded n1, and n2 as you asked.",
        "expect": {"has_function_result_for": CALL_ID, "last_user_contains": "n2"},
    }
    return [opening, closing]


# -- the child -----------------------------------------------------------------------------------
def emit(item: Mapping[str, Any]) -> None:
    print(json.dumps(item, ensure_ascii=False), flush=True)


async def _start_run(harness: Harness) -> None:
    bus = harness.bus
    await bus.trigger("session-tree::ensure", {"session_id": SESSION})
    await bus.trigger(
        "session-inbox::push",
        {
            "session_id": SESSION,
            "name": "steering",
            "item": UserMessage.text(STEERING).model_dump(mode="json"),
        },
    )
    reply = await harness.submit(PROMPT, session=SESSION, run_id=RUN_ID)
    if not reply.started:
        raise RuntimeError(f"run::start refused: {reply.reason}")


async def _pump(stream: RunStream) -> None:
    """Every event of the run, as stored, until ``agent_end``."""
    async for _ in stream:
        event = stream.frame
        emit(
            {
                "event": {
                    "seq": stream.seq,
                    "type": event["type"],
                    "event_id": event["event_id"],
                    "run_id": event["run_id"],
                    "session_id": event["session_id"],
                    "data": event["data"],
                    "live": stream.live,
                }
            }
        )


async def main(url: str, workdir: Path, case: KillPoint, *, first: bool, after: int) -> None:
    engine = open_engine(url)
    if first:
        install_holds(
            engine, case.holds, on_hold=lambda name: emit({"marker": "hold", "name": name})
        )
    tools = RecordTools(
        workdir / SIDE_EFFECTS,
        hold=asyncio.Event() if first and case.block_tool else None,
        on_hold=lambda function_id: emit({"marker": "hold", "name": function_id}),
    )
    harness = Harness(
        "scripted:crash-model",
        config=harness_config(workdir, scripted={"cursor": "transcript"}),
        engine=engine,
        script=script_turns(case, first=first),
        tools=["test::*"],
        workers=[tools.worker_spec()],
    )
    async with harness:
        if first:
            await _start_run(harness)
            emit({"marker": "started"})
        stream = await harness.follow(SESSION, after=after)
        try:
            await _pump(stream)
        finally:
            await stream.aclose()
        # agent_end is emitted just before the final commit: wait for the commit.
        view = await wait_for_terminal(harness, SESSION)
        status = await harness.bus.trigger(status_function("scripted"), {})
        emit(
            {
                "marker": "finished",
                "state": view.state,
                "stop_reason": view.stop_reason,
                "provider": status,
            }
        )


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("url")
    parser.add_argument("workdir", type=Path)
    parser.add_argument("--case", required=True, choices=sorted(CASES))
    parser.add_argument("--phase", required=True, choices=["first", "resume"])
    parser.add_argument("--after", type=int, default=0)
    return parser.parse_args(argv)


if __name__ == "__main__":
    args = _parse(sys.argv[1:])
    asyncio.run(
        main(
            args.url,
            args.workdir,
            CASES[args.case],
            first=args.phase == "first",
            after=args.after,
        )
    )
