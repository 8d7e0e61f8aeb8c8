"""``tackroom run "prompt"``: one agent run through :class:`tackroom.Harness`, streamed.

The answer streams to stdout token by token; tool calls, results and notes go to stderr, so
``tackroom run ... > answer.txt`` keeps only the answer. ``--json`` prints the event stream as
JSON lines instead. Exit codes: 0 the run ended normally, 1 it failed or stopped early (error,
max_turns, loop, aborted), 2 a usage problem (no model, busy session).

A session whose run was interrupted (the process was killed) is finished first: ``tackroom run
--session S "next"`` follows the interrupted run to its end, then runs the new prompt; ``tackroom
run --resume S`` only finishes it. When a ``tackroom serve`` owns the engine, the command attaches
to it through its local endpoint (``--attach`` forces that).
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import os
import sys
from pathlib import Path

from pydantic import ValidationError

from tackroom.cli import _startup
from tackroom.contracts.events import AgentEnd, AgentEvent, ApprovalRequested, ApprovalResolved
from tackroom.contracts.principal import Principal
from tackroom.engine.errors import EngineError
from tackroom.harness import Harness, PendingApproval, RunStream, SessionBusy
from tackroom.harness.errors import UsageError
from tackroom.harness.terminal import TerminalView
from tackroom.runtime.config import load_config
from tackroom.runtime.errors import HarnessError
from tackroom.runtime.typed import describe_validation_error

__all__ = ["add_parsers", "read_line", "run_agent"]

_TERMINAL = ("stopped", "failed")


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    run = commands.add_parser("run", help="run an agent on a prompt and stream the answer")
    run.add_argument("prompt", nargs="?", help="what to ask the agent")
    run.add_argument("--model", help="PROVIDER:MODEL (default: the config's agent.model)")
    run.add_argument("--session", help="session id to continue (default: a new session)")
    run.add_argument(
        "--resume", metavar="SESSION", help="finish the interrupted run of SESSION (no prompt)"
    )
    run.add_argument(
        "--mode",
        choices=["plan", "ask", "agent"],
        help="default: agent.mode; plan and ask run read-only tools only",
    )
    run.add_argument(
        "--yes",
        action="store_true",
        help="answer yes to every call the policy would ask about (its denials still hold)",
    )
    run.add_argument(
        "--as",
        dest="principal",
        metavar="ID",
        help="who the run acts for (default: agent.principal, else local:<OS user>)",
    )
    run.add_argument(
        "--role",
        dest="roles",
        action="append",
        default=[],
        metavar="ROLE",
        help="a role of --as (repeatable): tools' required permissions are checked against them",
    )
    run.add_argument("--max-turns", type=int, help="model calls at most (default 8)")
    run.add_argument("--tools", help="comma-separated function ids or globs offered as tools")
    run.add_argument("--script", type=Path, help="script for the scripted provider (YAML/JSONL)")
    run.add_argument("--json", action="store_true", help="print events as JSON lines")
    run.add_argument("--config", type=Path, help="config file (default: ./tackroom.yaml)")
    run.add_argument("--engine", help="engine URL, overriding the config's engine:")
    run.add_argument(
        "--attach",
        nargs="?",
        const=True,
        default=False,
        metavar="SOCKET",
        help="run on a `tackroom serve` (its endpoint socket, default the config's) instead of"
        " booting workers here",
    )
    run.add_argument(
        "--no-model-check",
        action="store_true",
        help="send a model name the catalog does not list (a model newer than the catalog)",
    )
    run.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> int:
    if args.resume and args.session and args.resume != args.session:
        return _usage("--resume names the session; drop --session or make them the same")
    session = args.resume or args.session
    if args.prompt is None and not args.resume:
        return _usage('what should the agent do? tackroom run "PROMPT" (or --resume SESSION)')
    config = load_config(args.config)
    model = args.model or config.agent.model
    if not model or ":" not in model:
        return _usage(
            "name a model as PROVIDER:MODEL with --model (or agent.model in tackroom.yaml),"
            " e.g. --model scripted:demo --script turn.yaml"
        )
    attach: bool | Path = Path(args.attach) if isinstance(args.attach, str) else args.attach
    try:
        principal = _principal(args.principal, args.roles, config.agent.principal)
    except ValueError as exc:
        return _usage(f"--as/--role: {exc}")
    try:
        harness = Harness(
            model,
            config=config,
            engine=args.engine,
            mode=args.mode,
            max_turns=args.max_turns,
            tools=args.tools.split(",") if args.tools else config.agent.tools,
            script=args.script,
            serve_endpoint=True,  # another terminal can approve: tackroom approve SESSION CALL
            attach=attach,
            check_model=not args.no_model_check,
            principal=principal,
            auto_approve=True if args.yes else None,
        )
    except UsageError as exc:
        return _usage(str(exc))
    return asyncio.run(run_agent(harness, args.prompt, session=session, json_lines=args.json))


def _principal(given: str | None, roles: list[str], configured: Principal | None) -> Principal:
    """``--as ID --role R``, else the config's principal, else the OS user (``local:NAME``)."""
    if given is None and not roles and configured is not None:
        return configured
    try:
        return Principal(id=given or f"local:{_os_user()}", roles=tuple(roles))
    except ValidationError as exc:
        raise ValueError(describe_validation_error(exc)) from None


def _os_user() -> str:
    """The OS user's name, or ``uid<N>`` where the account has no name (a container's uid)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return f"uid{os.getuid()}"


def _usage(message: str) -> int:
    print(f"tackroom: error: {message}", file=sys.stderr)
    return 2


async def run_agent(
    harness: Harness, prompt: str | None, *, session: str | None, json_lines: bool = False
) -> int:
    """Run ``prompt`` (after finishing an interrupted run of ``session``) and render it."""
    view = TerminalView(sys.stdout, sys.stderr, json_lines=json_lines)
    try:
        async with harness:
            _startup.started()
            problem = await harness.check_provider()
            if problem is not None:
                return _usage(problem)
            code = 0
            if session is not None:
                state = await harness.get_state(session)
                if state is not None and state.state not in _TERMINAL:
                    view.note(f"session {session}: finishing the interrupted run {state.run_id}")
                    code = await _show(harness, await harness.follow(session), view)
                elif prompt is None:
                    view.note(f"session {session} has no interrupted run")
            if prompt is None:
                return code
            try:
                return await _show(harness, harness.stream(prompt, session=session), view)
            except SessionBusy as exc:
                return _usage(str(exc))
    except (HarnessError, EngineError) as exc:
        return _usage(str(exc))


async def _show(harness: Harness, stream: RunStream, view: TerminalView) -> int:
    async with _Prompts(harness, view) as prompts:
        async for event in stream:
            prompts.seen(event)
            view.show(event, seq=stream.seq, live=stream.live, frame=stream.frame)
            if isinstance(event, AgentEnd):
                return view.finish(stream.result)
    return 1


class _Prompts:
    """The approval prompts of one run, each a task this object owns.

    A prompt does not hold up the event stream, and one whose call is decided elsewhere (another
    terminal, an expiry) is withdrawn at once rather than after Enter. One prompt at a time.
    """

    def __init__(self, harness: Harness, view: TerminalView) -> None:
        self._harness = harness
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

    def seen(self, event: AgentEvent) -> None:
        if isinstance(event, ApprovalRequested):
            pending = PendingApproval.of(event)
            call_id = pending.function_call_id
            self._open[call_id] = asyncio.create_task(self._ask(pending))
            self._open[call_id].add_done_callback(lambda _: self._open.pop(call_id, None))
        elif isinstance(event, ApprovalResolved):
            task = self._open.get(event.data.function_call_id)
            if task is not None and not task.done():
                task.cancel()
                self._view.note("")  # end the withdrawn prompt's line

    async def _ask(self, pending: PendingApproval) -> None:
        async with self._turn:
            await _ask_approval(self._harness, pending, self._view)


async def _ask_approval(harness: Harness, pending: PendingApproval, view: TerminalView) -> None:
    """Ask on the terminal: y (allow), n (deny, the default), a (allow for the whole session)."""
    call_id, function_id = pending.function_call_id, pending.function_id
    if not sys.stdin.isatty():
        view.note(
            f"{function_id} waits for approval (no terminal to ask on): run `tackroom approve"
            f" {pending.session_id} {call_id}` (or deny) in another terminal, or rerun with --yes"
        )
        return
    answer = await read_line(
        f"allow {function_id} {json.dumps(pending.arguments, ensure_ascii=False)}? [y/N/a=always] "
    )
    choice = answer.strip().lower()
    always = choice in ("a", "always")
    try:
        if always or choice in ("y", "yes"):
            await harness.approve(pending, always=always)
        else:
            await harness.deny(pending)
    except (EngineError, RuntimeError) as exc:  # expired, decided elsewhere meanwhile, ...
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
