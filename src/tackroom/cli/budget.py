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
from pathlib import Path
from typing import Any

from tackroom.cli._bus import bus
from tackroom.contracts import budget as c
from tackroom.runtime.config import load_config

__all__ = ["add_parsers"]

_WORKERS = ("engine", "budget")
Build = Callable[[argparse.Namespace], tuple[str, dict[str, Any]]]


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    budget = commands.add_parser("budget", help="LLM spend budgets: create, inspect, pause")
    actions = budget.add_subparsers(dest="budget_command", required=True, metavar="CMD")

    create = _action(
        actions, "create", "a cap in USD per period for a scope", _create, with_id=False
    )
    create.add_argument("scope", help="workspace/ID, agent/ID or session/ID")
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

    _action(actions, "get", "one budget", lambda a: (c.GET, _ref(a)))
    update = _action(actions, "update", "change cap, period or name", _update)
    update.add_argument("--cap", type=float, metavar="USD")
    update.add_argument("--period", choices=["day", "week", "month", "total"])
    update.add_argument("--name")
    _action(actions, "delete", "delete a budget and its usage", lambda a: (c.DELETE, _ref(a)))
    usage = _action(actions, "usage", "spend this period and before", _usage)
    usage.add_argument("--periods", type=int, default=12, help="earlier periods to show")
    _action(actions, "forecast", "spend projected to period end", lambda a: (c.FORECAST, _ref(a)))
    _action(actions, "reset", "zero this period's spend", lambda a: (c.RESET, _ref(a)))

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
    parser.add_argument("--json", action="store_true", help="print the raw reply as JSON")
    parser.add_argument("--config", type=Path, help="config file (default: ./tackroom.yaml)")
    parser.set_defaults(run=lambda args: asyncio.run(_run(args, build)))
    return parser


async def _run(args: argparse.Namespace, build: Build) -> int:
    function_id, request = build(args)
    async with bus(load_config(args.config), _WORKERS) as caller:
        reply = await caller.trigger(function_id, request)
    print(json.dumps(reply, indent=2, ensure_ascii=False) if args.json else _human(reply))
    return 0


def _ref(args: argparse.Namespace) -> dict[str, Any]:
    return {"budget_id": args.budget_id}


def _create(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    request: dict[str, Any] = {
        "scope": args.scope,
        "cap_usd": args.cap,
        "period": args.period,
        "enforce": not args.track_only,
    }
    optional = {"id": args.id, "name": args.name, "alert_function": args.alert_function}
    request.update({k: v for k, v in optional.items() if v is not None})
    if args.alert:
        request["alert_thresholds"] = args.alert
    return c.CREATE, request


def _list(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    return c.LIST, {} if args.scope is None else {"scope": args.scope}


def _update(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    patch = {"cap_usd": args.cap, "period": args.period, "name": args.name}
    return c.UPDATE, {**_ref(args), **{k: v for k, v in patch.items() if v is not None}}


def _usage(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    return c.USAGE, {**_ref(args), "periods": args.periods}


def _pause(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    return c.PAUSE, {**_ref(args), "paused": not args.off}


def _enforce(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    return c.ENFORCE, {**_ref(args), "enforce": not args.off}


def _exempt(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    request: dict[str, Any] = {**_ref(args), "exempt": not args.off}
    if args.hours is not None and not args.off:
        request["until"] = datetime.now(UTC).timestamp() + args.hours * 3600
    return c.EXEMPT, request


def _alerts(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    return c.ALERT_SET, {**_ref(args), "thresholds": args.threshold, "function_id": args.function}


# -- human output ------------------------------------------------------------------------------


def _usd(amount: Any) -> str:
    return f"${float(amount):,.4f}"


def _budget_line(budget: dict[str, Any]) -> str:
    flags = [
        name
        for name, on in (
            ("paused", budget.get("paused")),
            ("exempt", budget.get("exempt")),
            ("track-only", not budget.get("enforce", True)),
        )
        if on
    ]
    label = f"  {budget['name']}" if budget.get("name") else ""
    extra = f"  [{', '.join(flags)}]" if flags else ""
    return (
        f"{budget['id']:<16} {budget['scope']:<28} {budget['period']:<6} "
        f"cap {_usd(budget['cap_usd'])}{label}{extra}"
    )


def _period_line(period: dict[str, Any]) -> str:
    fired = ", ".join(f"{t:g}" for t in period.get("fired_thresholds", []))
    return (
        f"{period['period_key']:<12} spent {_usd(period['spent_usd'])}  "
        f"reserved {_usd(period['reserved_usd'])}  calls {period['records_count']}"
        + (f"  alerts {fired}" if fired else "")
    )


def _when(value: Any) -> str:
    if value is None:
        return "-"
    return datetime.fromtimestamp(float(value), UTC).strftime("%Y-%m-%d %H:%M UTC")


def _human(reply: Any) -> str:
    if not isinstance(reply, dict):
        return json.dumps(reply)
    if "budgets" in reply:
        return "\n".join(_budget_line(b) for b in reply["budgets"]) or "(no budgets)"
    if "current" in reply:
        lines = [f"{reply['budget_id']}: cap {_usd(reply['cap_usd'])} per {reply['period']}"]
        lines.append(_period_line(reply["current"]))
        lines.extend(_period_line(p) for p in reply["history"])
        return "\n".join(lines)
    if "projected_usd" in reply:
        state = "on track" if reply["on_track"] else "over"
        return (
            f"{reply['budget_id']} {reply['period_key']}: spent {_usd(reply['spent_usd'])}, "
            f"projected {_usd(reply['projected_usd'])} of {_usd(reply['cap_usd'])} ({state}); "
            f"cap reached {_when(reply['exhausts_at'])}"
        )
    if "scope" in reply and "cap_usd" in reply:
        return _budget_line(reply)
    if "period_key" in reply:
        return _period_line(reply)
    if "deleted" in reply:
        return "deleted" if reply["deleted"] else "no such budget"
    return json.dumps(reply, indent=2, ensure_ascii=False)
