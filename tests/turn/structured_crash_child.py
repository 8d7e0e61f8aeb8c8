"""Child process of the structured-output crash test: a harness whose run must answer a schema.

    python -m tests.turn.structured_crash_child ENGINE_URL WORKDIR --phase first|resume

A ``tackroom.Harness`` with the ``scripted`` provider (``cursor: transcript``: the request's
assistant messages pick the turn) on the engine at ``ENGINE_URL``. The model first answers JSON
that does not validate (``population`` is not an integer); the orchestrator commits that answer
with a corrective message and asks again. The ``first`` phase starts the run through
``run::start`` with ``output_schema`` and **holds** that corrective model call (it blocks
forever: ``{"marker": "hold"}``), so the parent kills it between the wrong answer and the
correction. The ``resume`` phase only boots: the orchestrator wakes the run, makes the corrective
call, and the run ends. Both print JSON lines: ``{"marker": "started"}``, ``{"marker": "hold"}``
and, when the run ended, ``{"marker": "finished", "state", "stop_reason", "provider"}``
(``provider``: the scripted provider's status in this process: its calls and violations).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from tackroom import Harness
from tackroom.contracts.messages import UserMessage
from tackroom.contracts.provider import request_field
from tackroom.contracts.turn import RUN_START, RunStartRequest
from tackroom.engine import open_engine
from tackroom.testing.scripted import status_function

from .harness import Hold, harness_config, install_holds, wait_for_terminal

__all__ = ["RIGHT", "RUN_ID", "SCHEMA", "SESSION", "WRONG"]

SESSION = "structured-crash"
RUN_ID = "run-structured"
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "population": {"type": "integer"}},
    "required": ["name", "population"],
}
WRONG = '{"name": "Oslo", "population": "about 700k"}'
RIGHT = '{"name": "Oslo", "population": 717710}'

SCRIPT = [
    {
        "text": WRONG,
        "usage": {"input_tokens": 50, "output_tokens": 11},
        "expect": {"last_user_contains": "Norway", "system_prompt_contains": '"population"'},
    },
    {
        "text": RIGHT,
        "usage": {"input_tokens": 70, "output_tokens": 9},
        "expect": {"last_user_contains": "is not of type 'integer'", "last_role": "user"},
    },
]


def emit(item: dict[str, Any]) -> None:
    print(json.dumps(item, ensure_ascii=False), flush=True)


def _corrective(payload: Any) -> bool:
    """The model call that follows the wrong answer: its request holds an assistant message."""
    messages = request_field(payload, "messages") or []
    return any(
        getattr(m, "role", None) == "assistant"
        or (isinstance(m, dict) and m.get("role") == "assistant")
        for m in messages
    )


async def main(url: str, workdir: Path, *, first: bool) -> None:
    engine = open_engine(url)
    if first:
        hold = Hold("corrective call", "provider::scripted::stream", _corrective)
        install_holds(engine, [hold], on_hold=lambda name: emit({"marker": "hold", "name": name}))
    harness = Harness(
        "scripted:crash-model",
        config=harness_config(workdir, scripted={"cursor": "transcript"}),
        engine=engine,
        script=SCRIPT,
    )
    async with harness:
        if first:
            request = RunStartRequest(
                session_id=SESSION,
                run_id=RUN_ID,
                provider="scripted",
                model="crash-model",
                messages=[UserMessage.text("Largest city of Norway, as JSON?")],
                output_schema=SCHEMA,
                output_name="City",
            )
            reply = await RUN_START.call(harness.bus, request)
            if not reply.started:
                raise RuntimeError(f"run::start refused: {reply.reason}")
            emit({"marker": "started"})
        view = await wait_for_terminal(harness, SESSION, timeout=15)
        status = await harness.bus.trigger(status_function("scripted"), {})
        emit(
            {
                "marker": "finished",
                "state": view.state,
                "stop_reason": view.stop_reason,
                "provider": status,
            }
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("url")
    parser.add_argument("workdir", type=Path)
    parser.add_argument("--phase", required=True, choices=["first", "resume"])
    args = parser.parse_args(sys.argv[1:])
    asyncio.run(main(args.url, args.workdir, first=args.phase == "first"))
