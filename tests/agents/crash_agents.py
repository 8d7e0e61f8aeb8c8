"""Child process of the subagent crash matrix: the scenario of :mod:`.scenario`, killed or resumed.

    python -m tests.agents.crash_agents ENGINE_URL WORKDIR --case NAME --phase first|resume

The ``first`` phase starts the lead's run (``Harness.submit``) with the case's holds installed
(a held call blocks forever and prints ``{"marker": "hold", "name": ...}``); the parent kills it
with SIGKILL once every hold of the case is reached. The ``resume`` phase only boots: the
orchestrator wakes every unfinished run (the lead and its children) and the lead must finish;
it prints ``{"marker": "finished", "state", "stop_reason", "output"}``. Both phases log each
``run::start`` that started a new run (not one resumed by its run id) to ``run_starts.log``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import json
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tackroom.contracts.agents import OUTCOMES_SCOPE, child_ids
from tackroom.engine import Engine, Handler, Registration, open_engine
from tackroom.testing import FunctionModel
from tackroom.workers.orchestrator.record import TURNS_SCOPE

from ..turn.harness import Hold, install_holds, wait_for_terminal
from .scenario import CALLS, PROMPT, answer, harness_for

__all__ = ["CASES", "LEAD", "LEAD_RUN", "STARTS_LOG", "CrashCase", "child_session"]

LEAD = "lead"
LEAD_RUN = "run-lead"
STARTS_LOG = "run_starts.log"


def child_session(name: str) -> str:
    return child_ids(LEAD, LEAD_RUN, CALLS[name], name)[0]


def _in_session(prefix: str) -> Callable[[Any], bool]:
    return lambda p: isinstance(p, dict) and str(p.get("session_id", "")).startswith(prefix)


def _appends(session_prefix: str, suffix: str) -> Callable[[Any], bool]:
    def match(payload: Any) -> bool:
        if not _in_session(session_prefix)(payload):
            return False
        return any(str(e.get("entry_id", "")).endswith(suffix) for e in payload.get("entries", []))

    return match


def _first_wake() -> Callable[[Any], bool]:
    """The lead's second ``turn::step`` delivery: the wake a child's outcome enqueued (the first
    drove the lead until it parked)."""
    seen = [0]

    def match(payload: Any) -> bool:
        if not isinstance(payload, dict) or payload.get("session_id") != LEAD:
            return False
        seen[0] += 1
        return seen[0] == 2

    return match


def _lead_after_gamma(payload: Any) -> bool:
    if not _in_session(LEAD)(payload) or str(payload.get("session_id")) != LEAD:
        return False
    return any(m.get("function_call_id") == CALLS["gamma"] for m in payload.get("messages", []))


@dataclass(frozen=True, slots=True)
class CrashCase:
    name: str
    holds: tuple[Hold, ...]
    side: str
    """Whose work the kill interrupts: ``parent`` or ``child``."""
    state_holds: tuple[str, ...] = ()
    """State scopes whose first write blocks forever (a kill between two writes)."""

    @property
    def hold_names(self) -> set[str]:
        return {hold.name for hold in self.holds} | {f"write {s}" for s in self.state_holds}


_STREAM = "provider::function::stream"
CASES: dict[str, CrashCase] = {
    case.name: case
    for case in [
        # The parent calls agent::alpha: the child is not started yet (beta may be).
        CrashCase("subagent_call", (Hold("agent::alpha", "agent::alpha"),), "parent"),
        # The agents worker linked alpha's child session; its run::start is held.
        CrashCase(
            "child_run_start",
            (Hold("run::start alpha", "run::start", _in_session("sub-alpha")),),
            "parent",
        ),
        # Both children are running (each in its model call); the parent parked.
        CrashCase(
            "children_running",
            (
                Hold("alpha model", _STREAM, _in_session("sub-alpha")),
                Hold("beta model", _STREAM, _in_session("sub-beta")),
            ),
            "child",
        ),
        # Alpha answered: its final step's session append is held (committed or not).
        CrashCase(
            "child_answer_stored",
            (
                Hold(
                    "alpha answer append",
                    "session-tree::append_batch",
                    _appends("sub-alpha", "-t1-a"),
                ),
            ),
            "child",
        ),
        # A child's run ended (its last step committed): the write of its outcome is held.
        CrashCase("child_ended", (), "child", state_holds=(OUTCOMES_SCOPE,)),
        # A child's outcome is written with the parent's wake; that wake's step is held.
        CrashCase("outcome_written", (Hold("first wake", "turn::step", _first_wake()),), "child"),
        # The parent read both outcomes and committed the batch: its result append is held.
        CrashCase(
            "parent_resumed",
            (
                Hold(
                    "alpha result append",
                    "session-tree::append_batch",
                    _appends(LEAD, f"fr-{CALLS['alpha']}"),
                ),
            ),
            "parent",
        ),
        # The third child (after the first two) is in its model call.
        CrashCase(
            "third_child_running",
            (Hold("gamma model", _STREAM, _in_session("sub-gamma")),),
            "child",
        ),
        # The parent has gamma's answer and asks its model for the final answer.
        CrashCase("parent_final_call", (Hold("lead final", _STREAM, _lead_after_gamma),), "parent"),
    ]
}


def emit(item: Mapping[str, Any]) -> None:
    print(json.dumps(item, ensure_ascii=False), flush=True)


def _log_new_starts(engine: Engine, path: Path) -> None:
    """Append ``<session> <run>`` to ``path`` for each ``run::start`` that started a new run."""
    register = engine.register_function

    async def register_function(function_id: str, handler: Handler, **options: Any) -> Registration:
        if function_id == "run::start":
            handler = _counting(handler, path, engine)
        return await register(function_id, handler, **options)

    setattr(engine, "register_function", register_function)  # noqa: B010


def _hold_writes(engine: Engine, scopes: tuple[str, ...]) -> None:
    """Block the first ``set_state`` on each of ``scopes`` forever (and say so)."""
    set_state = engine.set_state

    async def held_set_state(scope: str, key: str, value: Any, **options: Any) -> Any:
        if scope in scopes:
            emit({"marker": "hold", "name": f"write {scope}"})
            await asyncio.get_running_loop().create_future()
        return await set_state(scope, key, value, **options)

    setattr(engine, "set_state", held_set_state)  # noqa: B010


def _counting(handler: Handler, path: Path, engine: Engine) -> Handler:
    async def counted(payload: Any) -> Any:
        reply = await handler(payload)
        fields = reply if isinstance(reply, dict) else getattr(reply, "__dict__", {})
        if fields.get("started") and not fields.get("resumed"):
            session, run = str(fields.get("session_id")), str(fields.get("run_id"))
            # The start may be part of a caller's unit of work (the agents worker's): logged
            # once its record is committed, read from outside any unit, so a process killed
            # before that commit logs a start that never happened.
            task = asyncio.get_running_loop().create_task(
                _log_when_committed(engine, path, session, run), context=contextvars.Context()
            )
            _LOGGING.add(task)
            task.add_done_callback(_LOGGING.discard)
        return reply

    return counted


_LOGGING: set[asyncio.Task[None]] = set()


async def _log_when_committed(engine: Engine, path: Path, session: str, run: str) -> None:
    for _ in range(500):
        entry = await engine.get_state(TURNS_SCOPE, session)
        if entry is not None and isinstance(entry.value, dict) and entry.value.get("run_id") == run:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, f"{session} {run}\n".encode())
            finally:
                os.close(fd)
            return
        await asyncio.sleep(0.01)


async def main(url: str, workdir: Path, case: CrashCase, *, first: bool) -> None:
    engine = open_engine(url)
    _log_new_starts(engine, workdir / STARTS_LOG)
    if first:
        install_holds(
            engine, case.holds, on_hold=lambda name: emit({"marker": "hold", "name": name})
        )
        _hold_writes(engine, case.state_holds)
    harness = harness_for(workdir, engine=engine, model=FunctionModel(answer()))
    async with harness:
        if first:
            reply = await harness.submit(PROMPT, session=LEAD, run_id=LEAD_RUN)
            emit({"marker": "started", "started": reply.started})
            await asyncio.get_running_loop().create_future()  # held until killed
        view = await wait_for_terminal(harness, LEAD, timeout=30)
        entries = await harness.bus.trigger("session-tree::messages", {"session_id": LEAD})
        last = entries["messages"][-1]["message"]
        output = " ".join(b.get("text", "") for b in last["content"] if b.get("type") == "text")
        emit(
            {
                "marker": "finished",
                "state": view.state,
                "stop_reason": view.stop_reason,
                "output": output,
            }
        )


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("url")
    parser.add_argument("workdir", type=Path)
    parser.add_argument("--case", required=True, choices=sorted(CASES))
    parser.add_argument("--phase", required=True, choices=["first", "resume"])
    return parser.parse_args(argv)


if __name__ == "__main__":
    args = _parse(sys.argv[1:])
    asyncio.run(main(args.url, args.workdir, CASES[args.case], first=args.phase == "first"))
