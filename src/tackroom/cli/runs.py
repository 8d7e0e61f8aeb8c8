"""``tackroom runs abort|resume|holds``: the kill switch of a tenant's runs (``runs::hold``,
``runs::release``, ``runs::holds``, served by the orchestrator of the running harness)."""

from __future__ import annotations

import argparse
import asyncio
import getpass
import sys
from datetime import UTC, datetime

from tackroom.cli._bus import bus
from tackroom.cli._options import add_config, print_json
from tackroom.contracts.bus import Function, Req, Resp
from tackroom.contracts.principal import Principal
from tackroom.contracts.runholds import (
    HOLD,
    HOLDS,
    RELEASE,
    HoldRequest,
    HoldResponse,
    HoldsRequest,
    ReleaseRequest,
    TenantHolds,
)
from tackroom.engine.errors import FunctionNotFound
from tackroom.runtime.config import load_config

__all__ = ["add_parsers"]

_NOT_SERVED = (
    "no orchestrator answers {id}: the kill switch acts on a running harness; run this where"
    " `tackroom serve` runs (or on its NATS engine)"
)


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    runs = commands.add_parser("runs", help="the kill switch of a tenant's runs")
    actions = runs.add_subparsers(dest="runs_command", required=True, metavar="CMD")

    abort = actions.add_parser(
        "abort", help="abort every run of a tenant (or principal) and refuse new ones"
    )
    _target(abort)
    abort.add_argument("--reason", required=True, help="why (kept in the audit log)")
    add_config(abort, json="print the answer as JSON")
    abort.set_defaults(run=lambda args: asyncio.run(_abort(args)))

    resume = actions.add_parser("resume", help="lift the kill switch: runs may start again")
    _target(resume)
    add_config(resume, json="print the answer as JSON")
    resume.set_defaults(run=lambda args: asyncio.run(_resume(args)))

    holds = actions.add_parser("holds", help="the kill switches that are on for a tenant")
    holds.add_argument("--tenant", required=True, help="the tenant")
    add_config(holds, json="print them as JSON")
    holds.set_defaults(run=lambda args: asyncio.run(_holds(args)))


def _target(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tenant", required=True, help="the tenant whose runs")
    parser.add_argument("--principal", help="only this principal's runs (by id)")


def _actor(tenant: str) -> Principal:
    """Who flips the switch from this terminal: the OS user, named as a local caller."""
    try:
        user = getpass.getuser()
    except (OSError, KeyError):
        user = "cli"
    return Principal(id=f"local:{user}", tenant=tenant, method="local")


async def _ask(
    args: argparse.Namespace, function: Function[Req, Resp], request: Req
) -> Resp | None:
    try:
        async with bus(load_config(args.config), ("engine",), shared_bus_workers=()) as caller:
            return await function.call(caller, request)
    except FunctionNotFound:
        print(f"tackroom: error: {_NOT_SERVED.format(id=function.id)}", file=sys.stderr)
        return None


async def _abort(args: argparse.Namespace) -> int:
    request = HoldRequest(
        tenant=args.tenant, principal=args.principal, reason=args.reason, actor=_actor(args.tenant)
    )
    answer = await _ask(args, HOLD, request)
    if answer is None:
        return 1
    if args.json:
        print_json(HOLD.dump_response(answer))
    else:
        print(_aborted(answer))
    return 0


def _whose(tenant: str, principal: str | None) -> str:
    return f"tenant {tenant}" if principal is None else f"{principal} in tenant {tenant}"


def _aborted(answer: HoldResponse) -> str:
    whose = _whose(answer.tenant, answer.principal)
    state = "was already on" if answer.already_held else "is on"
    lines = [
        f"kill switch {state} for {whose}: new runs are refused;"
        f" {len(answer.aborted)} run(s) in flight aborted"
    ]
    lines += [
        f"  {run.session_id}  {run.run_id}  {run.principal or '-'}  ({run.state})"
        for run in answer.aborted
    ]
    return "\n".join(lines)


async def _resume(args: argparse.Namespace) -> int:
    request = ReleaseRequest(
        tenant=args.tenant, principal=args.principal, actor=_actor(args.tenant)
    )
    answer = await _ask(args, RELEASE, request)
    if answer is None:
        return 1
    if args.json:
        print_json(RELEASE.dump_response(answer))
        return 0
    whose = _whose(answer.tenant, answer.principal)
    if answer.released:
        print(f"kill switch lifted for {whose}: runs may start again")
    else:
        print(f"no kill switch was on for {whose}")
    return 0


async def _holds(args: argparse.Namespace) -> int:
    answer = await _ask(args, HOLDS, HoldsRequest(tenant=args.tenant))
    if answer is None:
        return 1
    if args.json:
        print_json(HOLDS.dump_response(answer))
    else:
        print(_listed(answer))
    return 0


def _listed(holds: TenantHolds) -> str:
    if holds.empty:
        return f"no kill switch is on for tenant {holds.tenant}"
    rows = [(f"tenant {holds.tenant}", holds.everyone)] if holds.everyone else []
    rows += [(f"{who} in tenant {holds.tenant}", hold) for who, hold in holds.principals.items()]
    return "\n".join(
        f"{whose}: held since {_when(hold.at)} by {hold.held_by}: {hold.reason}"
        for whose, hold in rows
    )


def _when(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M:%SZ")
