"""Child process of the compaction crash tests: a harness whose next run must compact.

    python -m tests.workers.compactor.crash_child ENGINE_URL WORKDIR --point NAME
                                                  --phase first|resume

``first`` fills a session with a long history (a pinned rule in it), starts a run whose context
cannot hold it, and **holds** at the kill point (printing ``{"marker": "hold"}``); the parent
kills it with SIGKILL. ``resume`` only boots and waits for the run to end, printing
``{"marker": "finished", "state", "stop_reason", "saw_rule"}`` — ``saw_rule``: the rule was in
the resumed model call's context.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tackroom import Harness
from tackroom.contracts.messages import AgentMessage, AssistantMessage, TextBlock, UserMessage
from tackroom.contracts.sessions import (
    APPEND_BATCH,
    ENSURE,
    PIN,
    AppendBatchRequest,
    BatchItem,
    EnsureRequest,
    PinRequest,
)
from tackroom.engine import open_engine
from tackroom.testing import FunctionModel, ModelInfo
from tests.turn.harness import Hold, harness_config, install_holds, wait_for_terminal

SESSION = "compaction-crash"
RUN_ID = "run-compact"
RULE = "RULE: answer in exactly one sentence."
HISTORY_PAIRS = 30
SUMMARY_START = "You compact a conversation"
CONTEXT = {"context_window_limit": 4_000, "reserve_tokens": 500, "keep_last": 4}


def history() -> list[tuple[str, AgentMessage]]:
    entries: list[tuple[str, AgentMessage]] = []
    for i in range(HISTORY_PAIRS):
        entries.append((f"h{i}-u", UserMessage.text(f"Question {i}: " + "words " * 60)))
        entries.append(
            (f"h{i}-a", AssistantMessage(content=[TextBlock(text=f"Answer {i}: " + "more " * 80)]))
        )
    return entries


def _is_summary(payload: Any) -> bool:
    return isinstance(payload, dict) and str(payload.get("system_prompt", "")).startswith(
        SUMMARY_START
    )


def _compaction_append(payload: Any) -> bool:
    entries = payload.get("entries", []) if isinstance(payload, dict) else []
    return any(str(e.get("entry_id", "")).startswith("compaction-") for e in entries)


POINTS: dict[str, Hold] = {
    # The summary call is in flight: nothing of the compaction is stored.
    "summary_call": Hold("summary call", "provider::function::stream", _is_summary),
    # The summary is written, its entry not yet appended.
    "summary_append": Hold("summary append", "session-tree::append_batch", _compaction_append),
    # The compaction entry is stored; the turn's own model call is in flight, uncommitted.
    "after_compaction": Hold(
        "turn model call", "provider::function::stream", lambda p: not _is_summary(p)
    ),
}


def emit(item: dict[str, Any]) -> None:
    print(json.dumps(item), flush=True)


def model(saw_rule: list[bool]) -> Callable[[list[AgentMessage], ModelInfo], str]:
    def answer(messages: list[AgentMessage], info: ModelInfo) -> str:
        if info.system_prompt.startswith(SUMMARY_START):
            return "The user asked thirty questions about words; each was answered."
        saw_rule.append(any(RULE in _text(m) for m in messages))
        return "Done, in one sentence."

    return answer


def _text(message: AgentMessage) -> str:
    return "".join(b.text for b in message.content if isinstance(b, TextBlock))


async def main(url: str, workdir: Path, point: str, *, first: bool) -> None:
    engine = open_engine(url)
    if first:
        install_holds(engine, [POINTS[point]], on_hold=lambda name: emit({"marker": "hold"}))
    saw_rule: list[bool] = []
    harness = Harness(
        FunctionModel(model(saw_rule)),
        config=harness_config(workdir),
        engine=engine,
        context=CONTEXT,
    )
    async with harness:
        if first:
            bus = harness.bus
            await ENSURE.call(bus, EnsureRequest(session_id=SESSION))
            items = [BatchItem(entry_id=i, message=m) for i, m in history()]
            await APPEND_BATCH.call(bus, AppendBatchRequest(session_id=SESSION, entries=items))
            await PIN.call(bus, PinRequest(session_id=SESSION, entry_id="rule", text=RULE))
            await harness.submit("One more question, please.", session=SESSION, run_id=RUN_ID)
            emit({"marker": "started"})
            await asyncio.get_running_loop().create_future()  # held: the parent kills us
        view = await wait_for_terminal(harness, SESSION, timeout=15.0)
        emit(
            {
                "marker": "finished",
                "state": view.state,
                "stop_reason": view.stop_reason,
                "saw_rule": saw_rule,
            }
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("workdir", type=Path)
    parser.add_argument("--point", required=True, choices=sorted(POINTS))
    parser.add_argument("--phase", required=True, choices=["first", "resume"])
    args = parser.parse_args()
    asyncio.run(main(args.url, args.workdir, args.point, first=args.phase == "first"))
