"""``http::fetch`` benchmark: a GET of a small local page through the bus vs httpx2 directly.

    python bench/http_fetch.py [--samples N] [--body-bytes N]

One JSON document: p50/p99 in milliseconds per figure, and the machine.

- ``bus_fetch``: ``engine.trigger("http::fetch", {url})`` on an in-memory engine hosting the
  ``http`` worker (request validation, the egress checks, a new pinned transport, the response
  model, the bus round trip);
- ``direct_fresh_client``: ``httpx2.AsyncClient(verify=context).get(url)`` with a new client per
  request and one SSL context for all (the worker's own shape: a transport per hop, one context;
  building a context, which loads the CA bundle, costs ~30 ms here);
- ``direct_shared_client``: one ``httpx2.AsyncClient`` for every request;
- ``overhead_ms``: ``bus_fetch`` p50 - ``direct_shared_client`` p50.

The server is ``tackroom.testing.http_server.LocalHTTPServer`` in the same event loop on
127.0.0.1 (it closes every connection, so no figure reuses one); samples interleave the three.
The machine is shared and noisy: quote figures from one run, with its ``loadavg_1m``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from datetime import UTC, datetime
from typing import Any

import httpx2
from _common import machine, summarize_ms, timed

from tackroom.engine import open_engine
from tackroom.runtime import Host
from tackroom.runtime.config import HarnessConfig
from tackroom.testing.engines import MEMORY_URL
from tackroom.testing.http_server import LocalHTTPServer, Reply
from tackroom.workers.http.worker import WORKER

SCHEMA_VERSION = 1


async def run(samples: int, body_bytes: int) -> dict[str, Any]:
    body = b"x" * body_bytes
    async with LocalHTTPServer({"/page": Reply(body=body)}) as server:
        url = server.url("/page")
        config = HarnessConfig.defaults().model_copy(
            update={"worker_config": {"http": {"allow_hosts": [server.authority],
                                               "allow_private": ["127.0.0.1"]}}}
        )  # fmt: skip
        context = httpx2.create_ssl_context(trust_env=False)
        async with (
            Host(engine=open_engine(MEMORY_URL), workers=[WORKER], config=config) as host,
            httpx2.AsyncClient(trust_env=False) as shared,
        ):

            async def bus() -> None:
                reply = await host.engine.trigger("http::fetch", {"url": url})
                assert reply["status"] == 200
                assert len(reply["body"]) == body_bytes

            async def fresh() -> None:
                async with httpx2.AsyncClient(trust_env=False, verify=context) as client:
                    assert len((await client.get(url)).content) == body_bytes

            async def reused() -> None:
                assert len((await shared.get(url)).content) == body_bytes

            figures: dict[str, list[float]] = {"bus_fetch": [], "direct_fresh_client": [],
                                               "direct_shared_client": []}  # fmt: skip
            calls = {"bus_fetch": bus, "direct_fresh_client": fresh, "direct_shared_client": reused}
            for _ in range(max(10, samples // 10)):  # warm-up
                for call in calls.values():
                    await call()
            for _ in range(samples):
                for name, call in calls.items():
                    figures[name].append(await timed(call))
    report = {name: summarize_ms(values) for name, values in figures.items()}
    overhead = report["bus_fetch"]["p50_ms"] - report["direct_shared_client"]["p50_ms"]
    return {**report, "overhead_ms": round(overhead, 3)}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=500)
    parser.add_argument("--body-bytes", type=int, default=2048)
    args = parser.parse_args()
    before = machine()
    figures = await run(args.samples, args.body_bytes)
    report = {
        "schema_version": SCHEMA_VERSION,
        "benchmark": "http",
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "body_bytes": args.body_bytes,
        "machine": before,
        "loadavg_1m_after": machine()["loadavg_1m"],
        "figures": figures,
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
