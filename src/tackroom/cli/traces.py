"""``tackroom traces [RUN|SESSION|TRACE]``: recent traces, or the waterfalls of one run or session.

Asks the trace store (``traces::*``): a ``tackroom serve`` that holds the embedded engine
through its endpoint, the store in another process on a shared (NATS) engine, or — when nobody
holds the embedded engine — a ``traces`` worker run in this process on the config's engine and
store file (which first reads what the stream holds since it last ran). This command traces
nothing itself. Exit codes: 0 shown; 1 nothing found, or no store answers; 2 a usage problem.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import shutil
import sys
from typing import Any

from tackroom.cli._bus import Caller, bus
from tackroom.cli._options import add_config
from tackroom.cli.waterfall import render_trace_list, render_waterfall
from tackroom.contracts.traces import GET, LIST, GetRequest, ListRequest, TraceDetail
from tackroom.engine.errors import FunctionNotFound, InvocationError
from tackroom.runtime.config import HarnessConfig, TracingSettings, load_config

__all__ = ["add_parsers"]

_TRACE_ID = re.compile(r"^[0-9a-f]{32}$")
_NO_STORE = (
    "no trace store answers: set `tracing: {exporters: [bus]}` in tackroom.yaml (the traces"
    " worker then boots with the agent workers), or run `tackroom worker run traces`"
)


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    traces = commands.add_parser(
        "traces", help="recent traces, or a run's or session's waterfall (the trace store)"
    )
    traces.add_argument(
        "target", nargs="?", metavar="RUN|SESSION", help="a run id, a session id or a trace id"
    )
    traces.add_argument("--limit", type=int, default=20, help="traces at most (default 20)")
    traces.add_argument("--width", type=int, help="columns (default: the terminal's)")
    add_config(traces, json="print the raw replies as JSON")
    traces.set_defaults(run=lambda args: asyncio.run(_run(args)))


def _untraced(config: HarnessConfig) -> HarnessConfig:
    """``config`` with this command's own tracing off (it would only trace itself)."""
    return config.model_copy(update={"tracing": TracingSettings(store=config.tracing.store)})


async def _run(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    store = config.tracing.store or "traces"
    width = args.width or shutil.get_terminal_size((100, 24)).columns
    try:
        async with bus(
            _untraced(config), ("engine", store), shared_bus_workers=(), read_only=True
        ) as caller:
            if args.target is None:
                return await _list(caller, limit=args.limit, as_json=args.json)
            details = await _find(caller, args.target, limit=args.limit)
    except FunctionNotFound:
        print(f"tackroom: error: {_NO_STORE}", file=sys.stderr)
        return 1
    if not details:
        print(f"tackroom: no traces of run or session {args.target!r}", file=sys.stderr)
        return 1
    if args.json:
        _print_json([GET.dump_response(detail) for detail in details])
    else:
        print("\n".join(render_waterfall(detail, width=width) for detail in details), end="")
    return 0


async def _list(caller: Caller, *, limit: int, as_json: bool) -> int:
    reply = await LIST.call(caller, ListRequest(limit=limit))
    if as_json:
        _print_json(LIST.dump_response(reply))
    else:
        print(render_trace_list(reply.traces, reply.sessions), end="")
    return 0


async def _find(caller: Caller, target: str, *, limit: int) -> list[TraceDetail]:
    """The traces of ``target`` as a trace id, else a run id, else a session id; oldest first."""
    if _TRACE_ID.match(target):
        try:
            return [await GET.call(caller, GetRequest(trace_id=target))]
        except InvocationError as exc:
            if exc.remote_code != "not_found":
                raise
    for field in ("run_id", "session_id"):
        listed = await LIST.call(caller, ListRequest(limit=limit, **{field: target}))
        if listed.traces:
            found = [GetRequest(trace_id=trace.trace_id) for trace in reversed(listed.traces)]
            return [await GET.call(caller, request) for request in found]
    return []


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, ensure_ascii=False))
