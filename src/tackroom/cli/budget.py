"""``tackroom budget ...``: create, list, inspect, pause and alert on LLM spend budgets.

Each command is one ``budget::*`` call to the budget worker of a running harness (a ``tackroom
serve`` through its local endpoint, a shared engine over the bus), or to a budget worker run in
this process on the config's engine when no harness holds it. Exit codes: 0 done; 1 a typed error
(``budget_not_found``, ``budget_exists``, ...); 2 a usage problem.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel

from tackroom.cli._bus import bus
from tackroom.cli._options import add_config, print_json
from tackroom.contracts import budget as c
from tackroom.contracts.bus import Function, Req, dump
from tackroom.runtime.config import load_config
from tackroom.runtime.typed import request_for

__all__ = ["add_parsers"]

_WORKERS = ("engine", "budget")
Call = tuple[Function[Any, Any], BaseModel]
"""A budget function and its request."""
Build = Callable[[argparse.Namespace], Call]


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    budget = commands.add_parser("budget", help="LLM spend budgets: create, inspect, pause")
    actions = budget.add_subparsers(dest="budget_command", required=True, metavar="CMD")

    create = _action(
        actions, "create", "a cap in USD per period for a scope", _create, with_id=False
    )
    create.add_argument(
        "scope", nargs="?", help="workspace/ID, agent/ID, session/ID, tenant/T or user/T~USER"
    )
    create.add_argument("--tenant", help="only this tenant's calls (alone: scope tenant/T)")
    create.add_argument("--user", help="only this user's calls (alone: scope user/T~USER)")
    create.add_argument("--cap", type=float, required=True, metavar="USD")
    create.add_argument("--period", choices=["day", "week", "month", "total"], default="month")
    create.add_argument("--id", help="the budget id (default: generated)")
    create.add_argument("--name")
    create.add_argument(
        "--alert", type=float, action="append", metavar="FRACTION",
        help="alert threshold as a fraction of the cap (repeat; default 0.5 0.8 1.0)",
    )  # fmt: skip
    create.add_argument("--alert-function", metavar="FUNCTION_ID")
    create.add_argument("--track-only", action="store_true", help="never deny, only track")

    listing = _action(actions, "list", "budgets, by scope", _list, with_id=False)
    listing.add_argument("--scope", help="a scope or a prefix such as agent/")
    listing.add_argument("--tenant", help="only this tenant's budgets")

    _action(actions, "get", "one budget", lambda a: _call(c.GET, **_ref(a)))
    update = _action(actions, "update", "change cap, period or name", _update)
    update.add_argument("--cap", type=float, metavar="USD")
    update.add_argument("--period", choices=["day", "week", "month", "total"])
    update.add_argument("--name")
    _action(
        actions, "delete", "delete a budget and its usage", lambda a: _call(c.DELETE, **_ref(a))
    )
    usage = _action(actions, "usage", "spend this period and before", _usage)
    usage.add_argument("--periods", type=int, default=12, help="earlier periods to show")
    _action(
        actions, "forecast", "spend projected to period end", lambda a: _call(c.FORECAST, **_ref(a))
    )
    _action(actions, "reset", "zero this period's spend", lambda a: _call(c.RESET, **_ref(a)))

    pause = _action(actions, "pause", "deny every check on the budget's scope", _pause)
    pause.add_argument("--off", action="store_true", help="unpause")
    enforce = _action(actions, "enforce", "deny calls over the cap", _enforce)
    enforce.add_argument("--off", action="store_true", help="track only")
    exempt = _action(actions, "exempt", "skip the budget in checks", _exempt)
    exempt.add_argument("--off", action="store_true", help="end the exemption")
    exempt.add_argument("--hours", type=float, help="end it after this long")
    alerts = _action(actions, "alerts", "set alert thresholds and function", _alerts)
    alerts.add_argument("--threshold", type=float, action="append", required=True)
    alerts.add_argument("--function", metavar="FUNCTION_ID", help="omit to turn alerts off")


def _action(
    actions: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    text: str,
    build: Build,
    *,
    with_id: bool = True,
) -> argparse.ArgumentParser:
    parser = actions.add_parser(name, help=text)
    if with_id:
        parser.add_argument("budget_id", metavar="BUDGET")
    add_config(parser, json="print the raw reply as JSON")
    parser.set_defaults(run=lambda args: asyncio.run(_run(args, build)))
    return parser


async def _run(args: argparse.Namespace, build: Build) -> int:
    function, request = build(args)
    async with bus(load_config(args.config), _WORKERS) as caller:
        reply = await function.call(caller, request)
    if args.json:
        print_json(function.dump_response(reply))
    else:
        print(_human(reply))
    return 0


def _call(function: Function[Req, Any], **fields: Any) -> Call:
    """``function`` and its request from ``fields`` (``None``: the request's default)."""
    given = {key: value for key, value in fields.items() if value is not None}
    return function, request_for(function, **given)


def _ref(args: argparse.Namespace) -> dict[str, Any]:
    return {"budget_id": args.budget_id}


def _create(args: argparse.Namespace) -> Call:
    return _call(
        c.CREATE,
        scope=args.scope,
        tenant=args.tenant,
        user=args.user,
        cap_usd=args.cap,
        period=args.period,
        enforce=not args.track_only,
        id=args.id,
        name=args.name,
        alert_function=args.alert_function,
        alert_thresholds=args.alert or None,
    )


def _list(args: argparse.Namespace) -> Call:
    return _call(c.LIST, scope=args.scope, tenant=args.tenant)


def _update(args: argparse.Namespace) -> Call:
    return _call(c.UPDATE, **_ref(args), cap_usd=args.cap, period=args.period, name=args.name)


def _usage(args: argparse.Namespace) -> Call:
    return _call(c.USAGE, **_ref(args), periods=args.periods)


def _pause(args: argparse.Namespace) -> Call:
    return _call(c.PAUSE, **_ref(args), paused=not args.off)


def _enforce(args: argparse.Namespace) -> Call:
    return _call(c.ENFORCE, **_ref(args), enforce=not args.off)


def _exempt(args: argparse.Namespace) -> Call:
    until = None
    if args.hours is not None and not args.off:
        until = datetime.now(UTC).timestamp() + args.hours * 3600
    return _call(c.EXEMPT, **_ref(args), exempt=not args.off, until=until)


def _alerts(args: argparse.Namespace) -> Call:
    # function_id has no default: None (alerts off) is sent as it is.
    request = request_for(
        c.ALERT_SET, **_ref(args), thresholds=args.threshold, function_id=args.function
    )
    return c.ALERT_SET, request


# -- human output ------------------------------------------------------------------------------


def _usd(amount: float) -> str:
    return f"${amount:,.4f}"


def _budget_line(budget: c.Budget) -> str:
    flags = [
        name
        for name, on in (
            ("paused", budget.paused),
            ("exempt", budget.exempt),
            ("track-only", not budget.enforce),
        )
        if on
    ]
    label = f"  {budget.name}" if budget.name else ""
    owner = [f"{k} {v}" for k, v in (("tenant", budget.tenant), ("user", budget.user)) if v]
    if owner and not budget.scope.startswith(("tenant/", "user/")):
        flags[:0] = owner  # a scope limited to a tenant or user says so
    extra = f"  [{', '.join(flags)}]" if flags else ""
    return (
        f"{budget.id:<16} {budget.scope:<28} {budget.period:<6} "
        f"cap {_usd(budget.cap_usd)}{label}{extra}"
    )


def _period_line(period: c.PeriodUsage) -> str:
    fired = ", ".join(f"{t:g}" for t in period.fired_thresholds)
    return (
        f"{period.period_key:<12} spent {_usd(period.spent_usd)}  "
        f"reserved {_usd(period.reserved_usd)}  calls {period.records_count}"
        + (f"  alerts {fired}" if fired else "")
    )


def _when(value: float | None) -> str:
    if value is None:
        return "-"
    return datetime.fromtimestamp(value, UTC).strftime("%Y-%m-%d %H:%M UTC")


def _human(reply: Any) -> str:
    match reply:
        case c.BudgetList(budgets=budgets):
            return "\n".join(_budget_line(b) for b in budgets) or "(no budgets)"
        case c.UsageResponse():
            lines = [f"{reply.budget_id}: cap {_usd(reply.cap_usd)} per {reply.period}"]
            lines.append(_period_line(reply.current))
            lines.extend(_period_line(p) for p in reply.history)
            return "\n".join(lines)
        case c.Forecast():
            state = "on track" if reply.on_track else "over"
            return (
                f"{reply.budget_id} {reply.period_key}: spent {_usd(reply.spent_usd)}, "
                f"projected {_usd(reply.projected_usd)} of {_usd(reply.cap_usd)} ({state}); "
                f"cap reached {_when(reply.exhausts_at)}"
            )
        case c.Budget():
            return _budget_line(reply)
        case c.PeriodUsage():
            return _period_line(reply)
        case c.Deleted(deleted=deleted):
            return "deleted" if deleted else "no such budget"
    return json.dumps(dump(reply), indent=2, ensure_ascii=False)
