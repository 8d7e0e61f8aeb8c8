"""``tackroom run "prompt"``: one agent run through :class:`tackroom.Harness`, streamed.

The answer streams to stdout token by token; tool calls, results and notes go to stderr, so
``tackroom run ... > answer.txt`` keeps only the answer. ``--json`` prints the event stream as
JSON lines instead. Exit codes: 0 the run ended normally, 1 it failed or stopped early (error,
max_turns, loop, aborted), 2 a usage problem (no model, busy session, nothing to resume), 3 the
run waits for an approval and there is no terminal to ask on (the lines to decide it are printed;
``--approval-timeout`` waits for a decision from elsewhere first).

A session whose run was interrupted (the process was killed) is finished first: ``tackroom run
--session S "next"`` follows the interrupted run to its end, then runs the new prompt; ``tackroom
run --resume S`` only finishes it; ``--continue`` takes the most recent session. When a ``tackroom
serve`` owns the engine, the command attaches to it through its local endpoint (``--attach``
forces that).
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import os
import shlex
import sys
from pathlib import Path
from typing import get_args

from pydantic import ValidationError

from tackroom.cli import _startup
from tackroom.cli._options import add_config, add_principal
from tackroom.cli.follow import EXIT_AWAITING_APPROVAL, Parked, awaiting, show_run
from tackroom.contracts.events import EVENTS
from tackroom.contracts.principal import Principal
from tackroom.contracts.turn import Mode
from tackroom.engine.errors import EngineError
from tackroom.harness import Harness, SessionBusy
from tackroom.harness.errors import UsageError
from tackroom.harness.terminal import TerminalView
from tackroom.runtime.config import load_config
from tackroom.runtime.errors import HarnessError
from tackroom.runtime.typed import describe_validation_error

__all__ = [
    "add_parsers",
    "build_harness",
    "finish_interrupted",
    "harness_options",
    "latest_session",
    "run_agent",
]

_TERMINAL = ("stopped", "failed")


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    run = commands.add_parser("run", help="run an agent on a prompt and stream the answer")
    run.add_argument("prompt", nargs="?", help="what to ask the agent")
    which = run.add_mutually_exclusive_group()
    which.add_argument(
        "--resume", metavar="SESSION", help="finish the interrupted run of SESSION (no prompt)"
    )
    which.add_argument(
        "--continue",
        dest="last",
        action="store_true",
        help="continue the most recent session (finishing its interrupted run first)",
    )
    harness_options(run)
    run.add_argument("--json", action="store_true", help="print events as JSON lines")
    run.add_argument(
        "--approval-timeout",
        type=float,
        metavar="SECONDS",
        help="without a terminal, wait this long for a call's approval from elsewhere"
        f" (tackroom approve) before exiting {EXIT_AWAITING_APPROVAL} (default: exit at once)",
    )
    run.set_defaults(run=_run)


def harness_options(parser: argparse.ArgumentParser) -> None:
    """The options that make the harness of ``tackroom run`` and ``tackroom chat``."""
    parser.add_argument("--model", help="PROVIDER:MODEL (default: the config's agent.model)")
    parser.add_argument("--session", help="session id to continue (default: a new session)")
    parser.add_argument(
        "--mode",
        choices=get_args(Mode),
        help="default: agent.mode; plan and ask run read-only tools only; planned fixes the"
        " tools from the request and hides untrusted content from the model",
    )
    parser.add_argument(
        "--yes",
        action="store_true",
        help="answer yes to every call the policy would ask about (its denials still hold)",
    )
    add_principal(
        parser,
        who="who the run acts for (default: agent.principal, else local:<OS user>)",
        roles="tools' required permissions are checked against them",
    )
    parser.add_argument("--max-turns", type=int, help="model calls at most (default 8)")
    parser.add_argument("--tools", help="comma-separated function ids or globs offered as tools")
    parser.add_argument("--script", type=Path, help="script for the scripted provider (YAML/JSONL)")
    add_config(parser)
    parser.add_argument("--engine", help="engine URL, overriding the config's engine:")
    parser.add_argument(
        "--attach",
        nargs="?",
        const=True,
        default=False,
        metavar="SOCKET",
        help="run on a `tackroom serve` (its endpoint socket, default the config's) instead of"
        " booting workers here",
    )
    parser.add_argument(
        "--no-model-check",
        action="store_true",
        help="send a model name the catalog does not list (a model newer than the catalog)",
    )


def _run(args: argparse.Namespace) -> int:
    if args.resume and args.session and args.resume != args.session:
        return _usage("--resume names the session; drop --session or make them the same")
    if args.last and args.session:
        return _usage("--continue picks the most recent session; drop --session or --continue")
    session = args.resume or args.session
    if args.prompt is None and not args.resume and not args.last:
        return _usage('what should the agent do? tackroom run "PROMPT" (or --resume SESSION)')
    if args.approval_timeout is not None and args.approval_timeout < 0:
        return _usage("--approval-timeout is a number of seconds, 0 or more")
    harness = build_harness(args)
    if isinstance(harness, int):
        return harness
    return asyncio.run(
        run_agent(
            harness,
            args.prompt,
            session=session,
            json_lines=args.json,
            last=args.last,
            approval_timeout=args.approval_timeout,
            parked=awaiting(options=_again(args)),
        )
    )


def _again(args: argparse.Namespace) -> str:
    """The options a ``tackroom run --resume`` of this run needs as well (its model)."""
    given = (
        ("--model", args.model),
        ("--script", args.script),
        ("--config", args.config),
        ("--engine", args.engine),
    )
    return "".join(f" {flag} {shlex.quote(str(value))}" for flag, value in given if value)


def build_harness(args: argparse.Namespace) -> Harness | int:
    """The harness :func:`harness_options` describe, or the exit code of a usage problem."""
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
        return Harness(
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
    harness: Harness,
    prompt: str | None,
    *,
    session: str | None,
    json_lines: bool = False,
    last: bool = False,
    approval_timeout: float | None = None,
    parked: Parked | None = None,
) -> int:
    """Run ``prompt`` (after finishing an interrupted run of ``session``) and render it.
    ``last``: continue the most recent session (``--continue``)."""
    view = TerminalView(sys.stdout, sys.stderr, json_lines=json_lines)
    try:
        async with harness:
            _startup.started()
            problem = await harness.check_provider()
            if problem is not None:
                return _usage(problem)
            if last:
                session = await latest_session(harness)
                if session is None:
                    return _usage('no session to continue: tackroom run "PROMPT" starts one')
            code: int | None = 0
            if session is not None:
                code = await finish_interrupted(
                    harness, session, view, approval_timeout=approval_timeout, parked=parked
                )
                if code is None and prompt is None:
                    return _usage(
                        f"session {session} has no interrupted run to resume"
                        f' (continue it with: tackroom run --session {session} "PROMPT")'
                    )
            if prompt is None or code == EXIT_AWAITING_APPROVAL:
                return code or 0
            stream = harness.stream(prompt, session=session)
            try:
                return await show_run(
                    harness, stream, view, approval_timeout=approval_timeout, parked=parked
                )
            except SessionBusy as exc:
                return _usage(str(exc))
    except (HarnessError, EngineError) as exc:
        return _usage(str(exc))


async def finish_interrupted(
    harness: Harness,
    session: str,
    view: TerminalView,
    *,
    approval_timeout: float | None,
    ask: bool | None = None,
    parked: Parked | None = None,
    saying: str = "finishing the interrupted run",
) -> int | None:
    """Follow ``session``'s interrupted run to its end (its exit code); ``None``: there is none.

    What the run showed before it was interrupted (tool calls that ran, their results) is not
    shown again: the view is told how far the session's stored events reached."""
    state = await harness.get_state(session)
    if state is None or state.state in _TERMINAL:
        return None
    view.note(f"session {session}: {saying} {state.run_id}")
    view.quiet_through(await _stored_seq(harness, session))
    try:
        stream = await harness.follow(session)
        return await show_run(
            harness, stream, view, approval_timeout=approval_timeout, ask=ask, parked=parked
        )
    finally:
        view.quiet_through(0)


async def _stored_seq(harness: Harness, session: str) -> int:
    """The sequence of ``session``'s last stored event (0 attached to a serve: its run was not
    interrupted by this process, so there is nothing shown twice)."""
    if harness.attached:
        return 0
    seq = 0
    while records := await harness.engine.read(EVENTS.name, session, after=seq, limit=1000):
        seq = records[-1].seq
    return seq


async def latest_session(harness: Harness) -> str | None:
    """The session most recently used (written to last), or ``None`` when there is none."""
    latest: tuple[float, str] | None = None
    cursor: str | None = None
    while True:
        page = await harness.sessions.list(limit=500, cursor=cursor)
        for info in page.sessions:
            if latest is None or info.updated_at > latest[0]:
                latest = (info.updated_at, info.session_id)
        if page.next_cursor is None:
            return None if latest is None else latest[1]
        cursor = page.next_cursor
