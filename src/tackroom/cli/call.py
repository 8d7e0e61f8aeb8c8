"""``tackroom call``, ``tackroom functions`` and ``tackroom workers``: reach a running harness.

On an embedded engine through the local endpoint of its ``tackroom serve``; on a shared engine
(``--engine nats://…``, or a config whose ``engine:`` is one) straight over the bus.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import math
import sys
from pathlib import Path
from typing import Any

from tackroom.cli._options import add_config, print_json
from tackroom.contracts.engine import FUNCTIONS_LIST, WORKERS_LIST, EmptyRequest
from tackroom.engine.errors import InvalidPayload
from tackroom.engine.factory import open_engine
from tackroom.engine.jsonvalue import parse_json
from tackroom.engine.protocol import DEFAULT_TIMEOUT
from tackroom.runtime.client import LocalClient
from tackroom.runtime.config import load_config

__all__ = ["add_parsers"]


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    call = commands.add_parser("call", help="trigger a function on a running tackroom serve")
    call.add_argument("function_id", help="e.g. state::get")
    call.add_argument(
        "payload", nargs="?", default="null", help="JSON payload ('-' reads stdin; default null)"
    )
    call.add_argument("--timeout", type=_seconds, default=DEFAULT_TIMEOUT, help="seconds")
    _endpoint_options(call)
    call.set_defaults(run=_run_call)

    functions = commands.add_parser("functions", help="list the function catalog")
    functions.add_argument("--json", action="store_true", help="print the raw catalog as JSON")
    _endpoint_options(functions)
    functions.set_defaults(run=_run_functions)

    workers = commands.add_parser(
        "workers", help="list the live workers: name, version, host, process, functions"
    )
    workers.add_argument("--json", action="store_true", help="print the raw list as JSON")
    _endpoint_options(workers)
    workers.set_defaults(run=_run_workers)


def _seconds(text: str) -> float:
    """``--timeout``: a positive, finite number of seconds (argparse names the option)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def _endpoint_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--socket", type=Path, help="endpoint socket (default: from the config)")
    add_config(parser)
    parser.add_argument("--engine", help="a shared engine URL (nats://…) to call over the bus")


def _client(args: argparse.Namespace) -> LocalClient | str:
    """The local endpoint's client, or the URL of a shared engine to call over the bus."""
    if args.engine is not None:
        return str(args.engine)
    if args.socket is not None:
        return LocalClient(args.socket)
    config = load_config(args.config)
    if not config.engine.startswith("embedded:"):
        return config.engine
    return LocalClient(config.endpoint.socket, max_frame_bytes=config.endpoint.max_frame_bytes)


async def _trigger(
    client: LocalClient | str, function_id: str, payload: Any, *, timeout: float = DEFAULT_TIMEOUT
) -> Any:
    if isinstance(client, str):
        engine = open_engine(client)
        await engine.start()
        try:
            return await engine.trigger(function_id, payload, timeout=timeout)
        finally:
            await engine.close()
    async with client:
        return await client.trigger(function_id, payload, timeout=timeout)


def _run_call(args: argparse.Namespace) -> int:
    text = sys.stdin.buffer.read() if args.payload == "-" else args.payload
    try:
        payload = parse_json(text, what="the payload")
    except InvalidPayload as exc:
        print(f"tackroom: error: {exc}", file=sys.stderr)
        return 2
    client = _client(args)
    result = asyncio.run(_trigger(client, args.function_id, payload, timeout=args.timeout))
    print_json(result)
    return 0


def _run_functions(args: argparse.Namespace) -> int:
    request = EmptyRequest().model_dump(mode="json")
    raw = asyncio.run(_trigger(_client(args), FUNCTIONS_LIST.id, request))
    catalog = FUNCTIONS_LIST.parse_response(raw)
    if args.json:
        print_json(FUNCTIONS_LIST.dump_response(catalog))
        return 0
    rows = sorted(
        (entry.function_id, entry.worker, entry.description) for entry in catalog.functions
    )
    width_id = max((len(row[0]) for row in rows), default=0)
    width_worker = max((len(row[1]) for row in rows), default=0)
    for function_id, worker, description in rows:
        print(f"{function_id:<{width_id}}  {worker:<{width_worker}}  {description}".rstrip())
    return 0


async def _workers(client: LocalClient | str) -> Any:
    """The live workers: read straight from a shared engine's catalog (no ``engine`` worker
    needed), else through the serve's endpoint."""
    if not isinstance(client, str):
        return await _trigger(client, WORKERS_LIST.id, EmptyRequest().model_dump(mode="json"))
    engine = open_engine(client)
    await engine.start()
    try:
        infos = await engine.list_workers()
    finally:
        await engine.close()
    return {"workers": [dataclasses.asdict(info) for info in infos]}


def _run_workers(args: argparse.Namespace) -> int:
    listing = WORKERS_LIST.parse_response(asyncio.run(_workers(_client(args))))
    if args.json:
        print_json(WORKERS_LIST.dump_response(listing))
        return 0
    rows = [("WORKER", "VERSION", "HOST", "PID", "FUNCTIONS")] + [
        (
            entry.name,
            entry.version or "-",
            entry.host,
            str(entry.pid),
            ", ".join(entry.functions),
        )
        for entry in sorted(listing.workers, key=lambda e: (e.name, e.host, e.pid))
    ]
    widths = [max(len(row[column]) for row in rows) for column in range(4)]
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row[:4], widths, strict=True)]
        print("  ".join([*cells, row[4]]).rstrip())
    return 0
