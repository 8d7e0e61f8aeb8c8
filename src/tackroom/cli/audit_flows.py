"""``tackroom audit flows --source GLOB``: what runs did after they read untrusted content from a
source — each call the model asked for afterwards, the gate's decision and rule, whether it ran
(:mod:`tackroom.kit.flows`, from the sessions' stored events)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable
from datetime import UTC, datetime

from tackroom.cli._bus import bus
from tackroom.cli._options import add_config, print_json
from tackroom.contracts.auditflows import FlowCall, FlowReport, FlowRun
from tackroom.engine.errors import FunctionNotFound
from tackroom.kit.flows import flows_report
from tackroom.runtime.config import load_config

__all__ = ["add_flows_parser", "render"]

_WORKERS = ("engine", "sessions")


def add_flows_parser(
    actions: argparse._SubParsersAction[argparse.ArgumentParser],
    *,
    since: Callable[[str], float],
) -> None:
    flows = actions.add_parser(
        "flows", help="what runs did after they read untrusted content from a source"
    )
    flows.add_argument(
        "--source", required=True, help="a glob over origins: http::fetch, 'mcp::mail::*', 'file:*'"
    )
    flows.add_argument(
        "--since", type=since, help="runs active since: ISO 8601, epoch seconds, or 7d/12h"
    )
    flows.add_argument("--tenant", help="only this tenant's sessions")
    flows.add_argument(
        "--max-sessions", type=int, default=1000, help="the newest sessions read (default 1000)"
    )
    add_config(flows, json="print the report as JSON")
    flows.set_defaults(run=lambda args: asyncio.run(_flows(args)))


async def _flows(args: argparse.Namespace) -> int:
    try:
        async with bus(load_config(args.config), _WORKERS, read_only=True) as caller:
            report = await flows_report(
                caller,
                source=args.source,
                tenant=args.tenant,
                since=args.since,
                max_sessions=args.max_sessions,
            )
    except FunctionNotFound as exc:
        print(
            f"tackroom: error: no worker serves {exc.function_id}: boot `sessions`", file=sys.stderr
        )
        return 1
    if args.json:
        print_json(report.model_dump(mode="json"))
    else:
        print(render(report))
    return 0


def render(report: FlowReport) -> str:
    """A table per run: the read, then the calls asked for after it, newest first."""
    if not report.runs:
        return f"no run read untrusted content from {report.source!r} ({_scanned(report)})"
    blocks = [_run(run) for run in report.runs]
    return "\n\n".join([*blocks, _scanned(report)])


def _scanned(report: FlowReport) -> str:
    more = "; more sessions exist (--max-sessions)" if report.truncated else ""
    return f"{report.sessions_scanned} session(s) read{more}"


def _run(run: FlowRun) -> str:
    read = run.read
    head = (
        f"{run.session_id}  {run.run_id}  {run.principal or '-'}  read {read.function_id}"
        f" ({', '.join(read.origins)}) at {_when(read.at)}"
    )
    if not run.calls:
        return f"{head}\n  no call after it"
    rows = [("WHEN", "FUNCTION", "DECISION", "RULE", "RAN", "ARGUMENTS")]
    rows += [_row(call) for call in run.calls]
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    lines = [
        "  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)) + "  " + row[5]
        for row in rows
    ]
    return "\n".join([head, *(line.rstrip() for line in lines)])


def _row(call: FlowCall) -> tuple[str, str, str, str, str, str]:
    decision = call.decision or "-"
    if call.approval is not None:
        decision += f" → {call.approval}"
    ran = "yes" if call.ran else "no"
    if call.ran and call.is_error:
        ran = "error"
    return (_when(call.at), call.function_id, decision, call.rule_id or "-", ran, call.arguments)


def _when(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M:%S")
