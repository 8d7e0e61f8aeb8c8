"""The agent demo: one question that needs two tool calls, end to end on the embedded engine.

The model is scripted (``agent_demo.yaml``), so the demo needs no API key and always behaves
the same; everything around it — the durable turn, the session tree, the gate, the tools, the
event stream — is the real harness.
"""

from __future__ import annotations

import json
import sys
import tempfile
import uuid
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import TextIO

from tackroom.cli.run import agent_host_config, run_agent
from tackroom.contracts.messages import UserMessage
from tackroom.contracts.turn import RunStartRequest
from tackroom.runtime.config import HarnessConfig
from tackroom.runtime.host import Host

__all__ = ["PROMPT", "run_agent_demo"]

PROMPT = "What is 1234 + 5678? Save the result to result.txt."


async def run_agent_demo(*, out: TextIO | None = None) -> int:
    def say(text: str = "") -> None:
        print(text, file=out or sys.stdout, flush=True)

    script = resources.files(__package__) / "agent_demo.yaml"
    with (
        tempfile.TemporaryDirectory(prefix="tackroom-demo-") as tmp,
        resources.as_file(script) as script_path,
    ):
        root = Path(tmp)
        config = HarnessConfig.defaults().model_copy(
            update={
                "engine": f"embedded:{root / 'engine.db'}",
                "worker_config": {"files": {"workspace_root": str(root / "workspaces")}},
            }
        )
        host_config = agent_host_config(config, provider="scripted", script=script_path)
        session_id = f"demo-{uuid.uuid4().hex[:8]}"
        say("tackroom demo: one agent run on the embedded engine (asyncio + SQLite)")
        say(f"  engine file: {root / 'engine.db'}")
        say("  the model is SCRIPTED (tackroom/demo/agent_demo.yaml): no API key, same every time")
        say(f"\nuser> {PROMPT}")
        request = RunStartRequest(
            session_id=session_id,
            provider="scripted",
            model="demo",
            messages=[UserMessage.text(PROMPT)],
            tools=["fs::*", "calc::*", "clock::*"],
        )
        code = await run_agent(Host.from_config(host_config), request)
        written = root / "workspaces" / session_id / "result.txt"
        saved = written.read_text().strip() if written.exists() else "(missing)"
        say(f"\nworkspace file result.txt: {saved}")
        await _show_transcript(host_config, session_id, say)
        say(
            "\nWhat happened: run::start persisted the turn; the orchestrator streamed the model,"
            "\nchecked and ran calc::add and fs::write (each once, through a ledger), appended"
            "\nevery message to the session tree and emitted the events you saw."
            "\n\nTry it yourself:"
            '\n  .venv/bin/tackroom run "What is 2 + 3?" --model scripted:demo --script my.yaml'
            "\nA real model is a worker that registers provider::<name>::stream; once one is"
            "\nbooted, pass --model <name>:<model> (see docs/workers/scripted.md for scripts)."
        )
        return code


async def _show_transcript(
    config: HarnessConfig, session_id: str, say: Callable[[str], None]
) -> None:
    viewer = Host.from_config(config.model_copy(update={"workers": ["engine", "sessions"]}))
    async with viewer:
        reply = await viewer.engine.trigger("session-tree::messages", {"session_id": session_id})
    say("\nthe session tree now holds:")
    for item in reply["messages"]:
        message = item["message"]
        role = message["role"]
        if role == "function_result":
            detail = _text(message)
        elif role == "assistant" and any(b["type"] == "function_call" for b in message["content"]):
            calls = [b for b in message["content"] if b["type"] == "function_call"]
            detail = ", ".join(f"{c['function_id']}({json.dumps(c['arguments'])})" for c in calls)
        else:
            detail = _text(message)
        say(f"  {item['entry_id']:<28} {role:<16} {detail[:70]}")


def _text(message: dict[str, object]) -> str:
    content = message.get("content")
    blocks = content if isinstance(content, list) else []
    return " ".join(str(b.get("text", "")) for b in blocks if isinstance(b, dict)).strip()
