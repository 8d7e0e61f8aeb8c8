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

from tackroom.contracts.sessions import MESSAGES, MessagesRequest
from tackroom.harness import Harness
from tackroom.harness.terminal import TerminalView
from tackroom.runtime.config import HarnessConfig

__all__ = ["PROMPT", "REAL_MODEL_HINT", "run_agent_demo"]

PROMPT = "What is 1234 + 5678? Save the result to result.txt."
TOOLS = ["fs::*", "calc::*", "clock::*"]

REAL_MODEL_HINT = (
    "With a real model: the openai provider (OpenAI, and Ollama, vLLM, DeepSeek, OpenRouter..."
    "\nthrough its profiles) and the anthropic provider ship with tackroom; their SDKs come with"
    "\npip install 'tackroom[openai]' / 'tackroom[anthropic]'. Store a key once, then name a model:"
    "\n  tackroom auth set openai        (or export OPENAI_API_KEY; likewise anthropic)"
    '\n  tackroom run "What is 2 + 3?" --model openai:gpt-5-mini'
    '\n  tackroom run "What is 2 + 3?" --model anthropic:claude-sonnet-4-6'
    '\n  tackroom run "What is 2 + 3?" --model ollama:qwen3     (a local server: no key)'
    "\nSee docs/workers/providers.md."
)
"""The demo's closing pointer to the shipped provider workers and ``tackroom auth``."""


async def run_agent_demo(*, out: TextIO | None = None, err: TextIO | None = None) -> int:
    stdout, stderr = out or sys.stdout, err or sys.stderr

    def say(text: str = "") -> None:
        print(text, file=stdout, flush=True)

    script = resources.files(__package__) / "agent_demo.yaml"
    with (
        tempfile.TemporaryDirectory(prefix="tackroom-demo-") as tmp,
        resources.as_file(script) as script_path,
    ):
        root = Path(tmp)
        session_id = f"demo-{uuid.uuid4().hex[:8]}"
        say("tackroom demo: one agent run on the embedded engine (asyncio + SQLite)")
        say(f"  engine file: {root / 'engine.db'}")
        say("  the model is SCRIPTED (tackroom/demo/agent_demo.yaml): no API key, same every time")
        say(f"\nuser> {PROMPT}")
        harness = Harness(
            "scripted:demo",
            config=HarnessConfig.defaults(),
            home=root,
            script=script_path,
            tools=TOOLS,
            # Nobody is at a prompt during the demo: the write it makes is approved for you
            # (`tackroom run` asks before a write; --yes does what this does).
            auto_approve=True,
        )
        async with harness:
            view = TerminalView(stdout, stderr, json_lines=False)
            stream = harness.stream(PROMPT, session=session_id)
            async for event in stream:
                view.show(event)
            code = view.finish(stream.result)
            written = root / "workspaces" / session_id / "result.txt"
            saved = written.read_text().strip() if written.exists() else "(missing)"
            say(f"\nworkspace file result.txt: {saved}")
            await _show_transcript(harness, session_id, say)
        say(
            "\nWhat happened: run::start persisted the turn; the orchestrator streamed the model,"
            "\nchecked and ran calc::add and fs::write (each once, through a ledger), appended"
            "\nevery message to the session tree and emitted the events you saw."
            "\n\nTry it yourself:"
            '\n  tackroom run "What is 2 + 3?" --model scripted:demo --script my.yaml'
            "\n  (scripts: docs/workers/scripted.md)"
            f"\n\n{REAL_MODEL_HINT}"
        )
        return code


async def _show_transcript(harness: Harness, session_id: str, say: Callable[[str], None]) -> None:
    reply = await MESSAGES.call(harness.engine, MessagesRequest(session_id=session_id))
    say("\nthe session tree now holds:")
    for item in reply.messages:
        message = item.message.model_dump(mode="json")
        role = message["role"]
        if role == "function_result":
            detail = _text(message)
        elif role == "assistant" and any(b["type"] == "function_call" for b in message["content"]):
            calls = [b for b in message["content"] if b["type"] == "function_call"]
            detail = ", ".join(f"{c['tool_name']}({json.dumps(c['arguments'])})" for c in calls)
        else:
            detail = _text(message)
        say(f"  {item.entry_id:<28} {role:<16} {detail[:70]}")


def _text(message: dict[str, object]) -> str:
    content = message.get("content")
    blocks = content if isinstance(content, list) else []
    return " ".join(str(b.get("text", "")) for b in blocks if isinstance(b, dict)).strip()
