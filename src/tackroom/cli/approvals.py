"""``tackroom approve|deny SESSION CALL`` and ``tackroom approvals list|mode``.

They reach the approvals worker of a running harness: a ``tackroom serve`` through its local
endpoint, a shared (NATS) engine over the bus; with no harness running, the worker runs in this
process on the config's engine (the decision is stored and the turn moves on when it restarts).
Exit codes: 0 done; 1 the call is not pending, already decided, expired, or no approvals worker
answers; 2 a usage problem.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import sys
import time
from typing import Any

from pydantic import ValidationError

from tackroom.cli._bus import bus
from tackroom.cli._options import add_config, add_principal, print_json
from tackroom.contracts import approvals as c
from tackroom.contracts.principal import Principal
from tackroom.engine.errors import FunctionNotFound
from tackroom.harness.terminal import clip
from tackroom.runtime.config import load_config

__all__ = ["add_parsers"]

_WORKERS = ("engine", "approvals")
_OURS = frozenset(f.id for f in (c.RESOLVE, c.GET, c.ALLOW_FOR_SESSION, c.LIST_PENDING, c.SET_MODE))


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    for verb, decision, text in (
        ("approve", "allow", "allow a function call waiting for approval"),
        ("deny", "deny", "deny a function call waiting for approval"),
    ):
        parser = commands.add_parser(verb, help=text)
        parser.add_argument("session_id", metavar="SESSION")
        parser.add_argument("function_call_id", metavar="CALL")
        parser.add_argument("--reason", help="why (recorded, and shown to the model on deny)")
        parser.add_argument("--approver", help="who decides (default: your user name)")
        add_principal(
            parser,
            who="the principal who decides, checked against the call's approver rules"
            " (default: --approver, else agent.principal, else local:<OS user>)",
            roles="a call may need an approver with a role",
        )
        parser.add_argument("--tenant", help="the tenant of --as (default: default)")
        if decision == "allow":
            parser.add_argument(
                "--always",
                action="store_true",
                help="also allow this function for the rest of the session",
            )
        _command(parser, _resolve, decision=decision)

    approvals = commands.add_parser("approvals", help="calls waiting for approval; session modes")
    actions = approvals.add_subparsers(dest="approvals_command", required=True, metavar="CMD")

    listing = actions.add_parser("list", help="the calls waiting for approval, oldest first")
    listing.add_argument("--session", help="only this session's calls")
    _command(listing, _list)

    mode = actions.add_parser("mode", help="set a session's approval mode")
    mode.add_argument("session_id", metavar="SESSION")
    mode.add_argument("mode", choices=["manual", "auto", "full"])
    mode.add_argument(
        "--allow",
        action="append",
        metavar="GLOB",
        help="with auto: a function id glob to allow without asking (repeatable; replaces)",
    )
    _command(mode, _mode)


def _command(parser: argparse.ArgumentParser, command: Any, **defaults: Any) -> None:
    """``--json`` and ``--config``; the parser runs ``command`` (see :func:`_runner`)."""
    add_config(parser, json="print the raw reply as JSON")
    parser.set_defaults(run=_runner(command), **defaults)


def _runner(command: Any) -> Any:
    def run(args: argparse.Namespace) -> int:
        try:
            code: int = asyncio.run(command(args))
        except FunctionNotFound as exc:
            if exc.function_id not in _OURS:
                raise
            print(
                f"tackroom: error: {exc} (is `approvals` in the harness's boot list?)",
                file=sys.stderr,
            )
            return 1
        return code

    return run


def _approver(args: argparse.Namespace) -> str:
    if args.approver:
        return str(args.approver)
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return "cli"


def _principal(args: argparse.Namespace, configured: Principal | None) -> Principal:
    """Who decides, as this local caller names itself: ``--as``/``--role``/``--tenant``, else
    ``--approver``, else the config's principal, else ``local:<OS user>``."""
    given = args.principal or args.approver
    if given is None and not args.roles and args.tenant is None and configured is not None:
        return configured
    fields: dict[str, Any] = {
        "id": given or f"local:{_approver(args)}",
        "roles": tuple(args.roles),
        "method": "local",
    }
    if args.tenant is not None:
        fields["tenant"] = args.tenant
    return Principal(**fields)


async def _resolve(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    try:
        principal = _principal(args, config.agent.principal)
    except ValidationError as exc:
        print(f"tackroom: error: --as/--role/--tenant: {exc}", file=sys.stderr)
        return 2
    request = c.ResolveRequest(
        session_id=args.session_id,
        function_call_id=args.function_call_id,
        decision=args.decision,
        reason=args.reason,
        approver=_approver(args),
        principal=principal,
    )
    async with bus(config, _WORKERS, shared_bus_workers=()) as caller:
        if getattr(args, "always", False):
            known = await c.GET.call(
                caller,
                c.GetRequest(session_id=args.session_id, function_call_id=args.function_call_id),
            )
            # Not pending: resolve below says why (not pending, already decided), nothing changes.
            if known.pending is not None:
                allow = c.AllowForSessionRequest(
                    session_id=args.session_id, function_id=known.pending.function_id
                )
                await c.ALLOW_FOR_SESSION.call(caller, allow)
        record = await c.RESOLVE.call(caller, request)
    if args.json:
        print_json(c.RESOLVE.dump_response(record))
        return 0
    verb = {"allow": "allowed", "deny": "denied", "aborted": "aborted"}[record.decision]
    what = record.function_id or "the call"
    if record.status == "pending":
        print(
            f"{record.approver} allowed {what} (call {args.function_call_id} of session"
            f" {args.session_id}): {record.approvals_so_far} of {record.needed} approvals, it"
            " still waits"
        )
        return 0
    print(
        f"{verb} {what} (call {args.function_call_id} of session {args.session_id})"
        f" by {record.approver}"
    )
    if getattr(args, "always", False):
        print(f"{what} is allowed for the rest of the session")
    return 0


async def _list(args: argparse.Namespace) -> int:
    request = c.ListPendingRequest(session_id=args.session)
    async with bus(load_config(args.config), _WORKERS, shared_bus_workers=()) as caller:
        reply = await c.LIST_PENDING.call(caller, request)
    if args.json:
        print_json(c.LIST_PENDING.dump_response(reply))
        return 0
    pending = reply.pending
    if not pending:
        print("no calls are waiting for approval")
        return 0
    now = time.time()
    for record in pending:
        arguments = clip(json.dumps(record.arguments, ensure_ascii=False), 80)
        print(
            f"{record.session_id}  {record.function_call_id}  {record.function_id} {arguments}"
            f"  (expires in {_duration(record.expires_at - now)})"
        )
        if record.reason:
            print(f"    {clip(record.reason, 120)}")
        rules = record.approvers
        if rules is not None and rules.restricts:
            so_far = f"; {len(record.votes)} of {rules.quorum} allowed" if rules.quorum > 1 else ""
            print(f"    needs {rules.describe()}{so_far}")
    return 0


async def _mode(args: argparse.Namespace) -> int:
    request = c.SetModeRequest(session_id=args.session_id, mode=args.mode, always_allow=args.allow)
    async with bus(load_config(args.config), _WORKERS, shared_bus_workers=()) as caller:
        settings = await c.SET_MODE.call(caller, request)
    if args.json:
        print_json(c.SET_MODE.dump_response(settings))
        return 0
    line = f"session {settings.session_id}: mode {settings.mode}"
    if settings.mode == "auto":
        line += f", always allow {', '.join(settings.always_allow) or 'nothing'}"
    print(line)
    return 0


def _duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h"
