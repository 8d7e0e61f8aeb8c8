"""``tackroom run "prompt"``: start an embedded harness, run one agent turn, stream it.

The answer streams to stdout token by token; tool calls, results and notes go to stderr, so
``tackroom run ... > answer.txt`` keeps only the answer. ``--json`` prints the event stream as
JSON lines instead. Exit codes: 0 the run ended normally, 1 it failed or stopped early (error,
max_turns, loop, aborted), 2 a usage problem (no model, busy session).
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import sys
import time
import uuid
from pathlib import Path
from typing import Any, TextIO

from tackroom.contracts import approvals as approvals
from tackroom.contracts.messages import UserMessage
from tackroom.contracts.provider import check_function
from tackroom.contracts.turn import (
    APPROVALS_SCOPE,
    EVENTS_STREAM,
    RUN_START,
    RunStartRequest,
    RunStartResponse,
)
from tackroom.engine.errors import EngineError, FunctionNotFound
from tackroom.engine.protocol import Engine
from tackroom.kit.providers.routing import provider_worker
from tackroom.runtime.config import HarnessConfig, load_config
from tackroom.runtime.host import Host

__all__ = ["add_parsers", "agent_host_config", "read_line", "run_agent"]


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    run = commands.add_parser("run", help="run an agent on a prompt and stream the answer")
    run.add_argument("prompt", help="what to ask the agent")
    run.add_argument("--model", help="PROVIDER:MODEL (default: the config's agent.model)")
    run.add_argument("--session", help="session id to continue (default: a new session)")
    run.add_argument("--mode", choices=["plan", "ask", "agent"], help="default: agent.mode")
    run.add_argument("--max-turns", type=int, help="model calls at most (default 8)")
    run.add_argument("--tools", help="comma-separated function ids or globs offered as tools")
    run.add_argument("--script", type=Path, help="script for the scripted provider (YAML/JSONL)")
    run.add_argument("--json", action="store_true", help="print events as JSON lines")
    run.add_argument("--config", type=Path, help="config file (default: ./tackroom.yaml)")
    run.add_argument("--engine", help="engine URL, overriding the config's engine:")
    run.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    model = args.model or config.agent.model
    if not model or ":" not in model:
        print(
            "tackroom: error: name a model as PROVIDER:MODEL with --model (or agent.model in"
            " tackroom.yaml), e.g. --model scripted:demo --script turn.yaml",
            file=sys.stderr,
        )
        return 2
    provider, _, model_name = model.partition(":")
    if provider == "scripted" and args.script is None:
        print("tackroom: error: the scripted provider needs --script FILE", file=sys.stderr)
        return 2
    host_config = agent_host_config(config, provider=provider, script=args.script)
    request = RunStartRequest(
        session_id=args.session or f"s-{uuid.uuid4().hex[:12]}",
        message_id=f"run-{uuid.uuid4().hex[:12]}",
        provider=provider,
        model=model_name,
        mode=args.mode or config.agent.mode,
        messages=[UserMessage.text(args.prompt)],
        max_turns=args.max_turns or config.agent.max_turns,
        tools=args.tools.split(",") if args.tools else config.agent.tools,
    )
    # The local endpoint lets another terminal approve a call (tackroom approve SESSION CALL).
    host = Host.from_config(host_config, engine_url=args.engine, serve_endpoint=True)
    return asyncio.run(run_agent(host, request, json_lines=args.json))


def agent_host_config(
    config: HarnessConfig, *, provider: str, script: Path | None = None
) -> HarnessConfig:
    """``config`` with the agent's workers and ``provider``'s worker in the boot list.

    A provider served by a profile of a provider worker (``ollama`` → ``openai``) boots that
    worker; any other provider name is taken as a worker of that name.
    """
    worker = provider_worker(provider, config.worker_config) or provider
    workers = list(dict.fromkeys([*config.agent.workers, *config.workers, worker]))
    sections = dict(config.worker_config)
    if script is not None:
        sections["scripted"] = {"script_path": str(script.resolve()), "per_session": True}
    return config.model_copy(update={"workers": workers, "worker_config": sections})


async def run_agent(host: Host, request: RunStartRequest, *, json_lines: bool = False) -> int:
    async with host:
        engine = host.engine
        problem = await _provider_problem(engine, request.provider)
        if problem is not None:
            print(f"tackroom: error: {problem}", file=sys.stderr)
            return 2
        subscription = await engine.subscribe(EVENTS_STREAM, request.session_id)
        try:
            reply = RunStartResponse.model_validate(
                await engine.trigger(RUN_START, request.model_dump(mode="json"))
            )
            if not reply.started:
                print(f"tackroom: run refused: {reply.reason}", file=sys.stderr)
                return 2
            view = _Renderer(sys.stdout, sys.stderr, json_lines=json_lines)
            async with _Prompts(engine, request.session_id, view) as prompts:
                async for record in subscription:
                    event = record.data
                    if event.get("run_id") != reply.run_id:
                        continue
                    prompts.seen(event)
                    view.show(record.seq, event)
                    if event["type"] == "agent_end":
                        return view.finish(event["data"])
        finally:
            await subscription.aclose()
    return 1


class _Prompts:
    """The approval prompts of one run, each a task this object owns.

    A prompt does not hold up the event stream, and one whose call is decided elsewhere (another
    terminal, an expiry) is withdrawn at once rather than after Enter. One prompt at a time.
    """

    def __init__(self, engine: Engine, session_id: str, view: _Renderer) -> None:
        self._engine = engine
        self._session_id = session_id
        self._view = view
        self._open: dict[str, asyncio.Task[None]] = {}
        self._turn = asyncio.Lock()

    async def __aenter__(self) -> _Prompts:
        return self

    async def __aexit__(self, *_: object) -> None:
        tasks = list(self._open.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def seen(self, event: dict[str, Any]) -> None:
        data = event["data"]
        if event["type"] == "approval_requested":
            call_id = data["function_call_id"]
            self._open[call_id] = asyncio.create_task(self._ask(data))
            self._open[call_id].add_done_callback(lambda _: self._open.pop(call_id, None))
        elif event["type"] == "approval_resolved":
            task = self._open.get(data["function_call_id"])
            if task is not None and not task.done():
                task.cancel()
                self._view.note("")  # end the withdrawn prompt's line

    async def _ask(self, data: dict[str, Any]) -> None:
        async with self._turn:
            await _ask_approval(self._engine, self._session_id, data, self._view)


async def _provider_problem(engine: Engine, provider: str) -> str | None:
    """What keeps ``provider`` from answering (no key, no server), if it can tell."""
    try:
        reply = await engine.trigger(check_function(provider), {}, timeout=5.0)
    except FunctionNotFound:
        return None  # a provider without ``check`` is assumed ready
    except EngineError:
        return None
    if isinstance(reply, dict) and reply.get("ready") is False:
        return str(reply.get("problem") or f"provider {provider!r} is not ready")
    return None


async def _ask_approval(
    engine: Engine, session_id: str, data: dict[str, Any], view: _Renderer
) -> None:
    """Ask on the terminal: y (allow), n (deny, the default), a (allow for the whole session)."""
    call_id, function_id = data["function_call_id"], data["function_id"]
    if not sys.stdin.isatty():
        view.note(f"waiting for approval of {function_id} (call {call_id})")
        return
    answer = await read_line(
        f"allow {function_id} {json.dumps(data['arguments'])}? [y/N/a=always] "
    )
    choice = answer.strip().lower()
    always = choice in ("a", "always")
    decision = "allow" if always or choice in ("y", "yes") else "deny"
    try:
        await _decide(engine, session_id, call_id, function_id, decision, always=always)
    except EngineError as exc:  # expired, decided elsewhere meanwhile, ...
        view.note(f"the decision was not recorded: {exc}")
        return
    if always:
        view.note(f"{function_id} is allowed for the rest of the session")


async def read_line(prompt: str) -> str:
    """A line from stdin read through the event loop, so waiting for it can be cancelled
    (``input()`` in a thread cannot be)."""
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


async def _decide(
    engine: Engine,
    session_id: str,
    call_id: str,
    function_id: str,
    decision: str,
    *,
    always: bool,
) -> None:
    """Through ``approval::resolve`` when the approvals worker holds the call pending; else (no
    approvals worker, or a turn that parked without it) the decision is written directly,
    create-only, where the orchestrator reads it."""
    approver = _user()
    key = {"session_id": session_id, "function_call_id": call_id}
    try:
        known = await engine.trigger(approvals.GET, key)
    except FunctionNotFound:
        known = None
    if known is not None and (known.get("pending") or known.get("decision")):
        if always:
            await engine.trigger(
                approvals.ALLOW_FOR_SESSION, {"session_id": session_id, "function_id": function_id}
            )
        await engine.trigger(approvals.RESOLVE, {**key, "decision": decision, "approver": approver})
        return
    record = {"decision": decision, "approver": approver, "decided_at": time.time()}
    await engine.set_state(APPROVALS_SCOPE, f"{session_id}/{call_id}", record, expected_revision=0)


def _user() -> str:
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return "cli"


class _Renderer:
    def __init__(self, out: TextIO, err: TextIO, *, json_lines: bool) -> None:
        self._out = out
        self._err = err
        self._json = json_lines
        self._mid_line = False

    def show(self, seq: int, event: dict[str, Any]) -> None:
        if self._json:
            print(json.dumps({"seq": seq, **event}, ensure_ascii=False), file=self._out, flush=True)
            return
        kind, data = event["type"], event["data"]
        if kind == "message_update" and data["kind"] == "text":
            self._out.write(data["delta"])
            self._out.flush()
            self._mid_line = not data["delta"].endswith("\n")
        elif kind == "function_execution_start":
            self.note(
                f"→ {data['function_id']} {json.dumps(data['arguments'], ensure_ascii=False)}"
            )
        elif kind == "function_execution_end":
            text = " ".join(
                block.get("text", "")
                for block in data["result"]["content"]
                if isinstance(block, dict)
            )
            mark = "✗" if data["is_error"] else "←"
            self.note(f"{mark} {_clip(text)}")
        elif kind == "message_complete" and data["message"].get("role") == "custom":
            self.note(" ".join(b.get("text", "") for b in data["message"]["content"]))
        elif kind == "error":
            self.note(f"error: {data['message']}")
        elif kind == "gate_decision" and data["decision"] == "deny":
            rule = f": {data['rule_id']}" if data.get("rule_id") else ""
            self.note(
                f"✗ {data['function_id']} denied ({data['decided_by']}{rule}): {data['reason']}"
            )
        elif kind == "approval_resolved":
            reason = f": {data['reason']}" if data.get("reason") else ""
            self.note(
                f"{data['function_id']} (call {data['function_call_id']}) {data['decision']}"
                f" by {data.get('approver') or 'unknown'}{reason}"
            )

    def note(self, text: str) -> None:
        if self._mid_line and not self._json:
            self._out.write("\n")
            self._out.flush()
            self._mid_line = False
        print(text, file=self._err, flush=True)

    def finish(self, data: dict[str, Any]) -> int:
        if self._mid_line:
            self._out.write("\n")
            self._out.flush()
        ok = data.get("state") == "stopped" and data.get("stop_reason") == "end"
        if not self._json and not ok:
            self.note(f"run ended: {data.get('state')} ({data.get('stop_reason')})")
        return 0 if ok else 1


def _clip(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
