"""``tackroom call`` and ``tackroom functions``: reach a running serve via its endpoint."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

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
    call.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds")
    _endpoint_options(call)
    call.set_defaults(run=_run_call)

    functions = commands.add_parser("functions", help="list the function catalog")
    functions.add_argument("--json", action="store_true", help="print the raw catalog as JSON")
    _endpoint_options(functions)
    functions.set_defaults(run=_run_functions)


def _endpoint_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--socket", type=Path, help="endpoint socket (default: from the config)")
    parser.add_argument("--config", type=Path, help="config file (default: ./tackroom.yaml)")


def _client(args: argparse.Namespace) -> LocalClient:
    if args.socket is not None:
        return LocalClient(args.socket)
    endpoint = load_config(args.config).endpoint
    return LocalClient(endpoint.socket, max_frame_bytes=endpoint.max_frame_bytes)


async def _trigger(
    client: LocalClient, function_id: str, payload: Any, *, timeout: float = DEFAULT_TIMEOUT
) -> Any:
    async with client:
        return await client.trigger(function_id, payload, timeout=timeout)


def _run_call(args: argparse.Namespace) -> int:
    text = sys.stdin.read() if args.payload == "-" else args.payload
    try:
        payload = json.loads(text)
    except json.JSONDecodeError as exc:
        print(f"tackroom: error: the payload is not JSON: {exc}", file=sys.stderr)
        return 2
    client = _client(args)
    result = asyncio.run(_trigger(client, args.function_id, payload, timeout=args.timeout))
    print(json.dumps(result, indent=2, ensure_ascii=False))
    return 0


def _run_functions(args: argparse.Namespace) -> int:
    catalog = asyncio.run(_trigger(_client(args), "engine::functions::list", None))
    if args.json:
        print(json.dumps(catalog, indent=2, ensure_ascii=False))
        return 0
    rows = sorted(
        (entry["function_id"], entry["worker"], entry["description"])
        for entry in catalog["functions"]
    )
    width_id = max((len(row[0]) for row in rows), default=0)
    width_worker = max((len(row[1]) for row in rows), default=0)
    for function_id, worker, description in rows:
        print(f"{function_id:<{width_id}}  {worker:<{width_worker}}  {description}".rstrip())
    return 0
