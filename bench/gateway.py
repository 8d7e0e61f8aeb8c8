"""The gateway's cost: first token and per-event overhead against ``agent::events`` directly, and
the memory of idle SSE clients.

    python bench/gateway.py [--samples N] [--events N] [--clients N]

One JSON document with the machine (``loadavg_1m`` before and after) and, per figure, medians:

- ``first_token``: from the start of a run to its first ``message_update``, on a fresh session
  whose events are already being followed — through the gateway (``POST /v1/runs``, the event
  read from the open ``GET /v1/sessions/{id}/events`` stream) and directly (``run::start`` on
  the bus, the event from an ``agent::events`` subscription, as ``Harness.stream`` does);
  interleaved. ``added_ms`` is the difference of the medians (target ≤ 2 ms).
- ``per_event``: reading ``--events`` stored events of one session from the start, through the
  gateway's SSE stream and through a subscription; ``added_us`` is the difference per event
  (target ≤ 50 µs).
- ``idle_clients``: ``--clients`` SSE streams open on one gateway in a process of its own
  (embedded engine, sessions, gateway), idle; its RSS before and after, per client (target
  ≤ 64 KiB).
- ``auth``: what authenticating a request adds over the unauthenticated path, per credential
  (the shared token, an API key, an OIDC JWT; warm and cold caches): ``bench/auth.py`` (target
  ≤ 0.3 ms for an API key and a JWT, as a user's requests meet them: warm).

The client is a few lines of raw HTTP/1.1 on asyncio streams in the bench's own process and
event loop (the first two figures), so what is measured is the gateway's work, not an HTTP
library's. The model is the scripted one (one word per delta, one event per delta). The machine
is shared and noisy: quote figures from one run, with its ``loadavg_1m``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from _common import machine
from auth import auth_overhead

from tackroom.contracts.events import EVENTS
from tackroom.contracts.messages import UserMessage
from tackroom.contracts.sessions import CREATE, CreateRequest
from tackroom.contracts.turn import RUN_START, RunStartRequest
from tackroom.engine import Engine, open_engine
from tackroom.runtime.config import HarnessConfig
from tackroom.runtime.host import Host
from tackroom.runtime.registry import load_worker

SCHEMA_VERSION = 1
TOKEN = "bench-token-0123456789abcdef"
TARGETS = {
    "first_token_added_ms": 2.0,
    "per_event_added_us": 50.0,
    "idle_client_kib": 64.0,
    "api_key_added_ms": 0.3,
    "oidc_added_ms": 0.3,
}
_STALL = 30.0
"""Seconds one sample may take before the benchmark gives up (something is broken)."""
_ANSWER = " ".join(f"word{i}" for i in range(20))


# -- a raw HTTP/1.1 client -----------------------------------------------------------------------


class Connection:
    """One keep-alive connection; requests are written by hand, responses read minimally."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, port: int) -> Connection:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(reader, writer)

    def send(self, method: str, path: str, body: bytes = b"") -> None:
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer {TOKEN}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        self.writer.write(head.encode() + body)

    async def head(self) -> tuple[int, dict[str, str]]:
        raw = await self.reader.readuntil(b"\r\n\r\n")
        status_line, *lines = raw.decode().split("\r\n")
        headers = dict(line.lower().split(": ", 1) for line in lines if ": " in line)
        return int(status_line.split()[1]), headers

    async def json(self) -> tuple[int, Any]:
        status, headers = await self.head()
        body = await self.reader.readexactly(int(headers.get("content-length", "0")))
        return status, json.loads(body) if body else None

    async def event(self) -> bytes:
        """The next SSE event or comment (with the chunk framing around it)."""
        return await self.reader.readuntil(b"\n\n")

    def close(self) -> None:
        self.writer.close()


# -- the in-process harness ----------------------------------------------------------------------


@asynccontextmanager
async def hosted(home: Path, workers: list[str]) -> AsyncIterator[tuple[Host, int]]:
    config = HarnessConfig.defaults().model_copy(
        update={
            "worker_config": {
                "gateway": {"port": 0, "token": TOKEN, "token_path": None},
                "scripted": {"script": [{"text": _ANSWER}], "per_session": True},
                "orchestrator": {"coalesce_chars": 1},
            }
        }
    )
    host = Host(
        engine=open_engine(f"embedded:{home / 'engine.db'}"),
        workers=[load_worker(name) for name in workers],
        config=config,
    )
    async with host:
        [line] = [a for a in host.announcements if a.startswith("console: ")]
        port = int(line.split("#")[0].rstrip("/").rpartition(":")[2])
        yield host, port


def _start(session_id: str) -> RunStartRequest:
    return RunStartRequest(
        session_id=session_id,
        provider="scripted",
        model="demo",
        messages=[UserMessage.text("say something")],
    )


async def _gateway_first_token(engine: Engine, port: int, session_id: str) -> float:
    await CREATE.call(engine, CreateRequest(session_id=session_id))
    stream, api = await Connection.open(port), await Connection.open(port)
    try:
        stream.send("GET", f"/v1/sessions/{session_id}/events")
        status, _ = await stream.head()
        assert status == 200, status
        body = json.dumps(
            {"prompt": "say something", "session_id": session_id, "model": "scripted:demo"}
        ).encode()
        begun = time.perf_counter()
        api.send("POST", "/v1/runs", body)
        while b"event: message_update" not in await stream.event():
            pass
        took = time.perf_counter() - begun
        status, reply = await api.json()
        assert status == 202, reply
        while b"event: agent_end" not in await stream.event():
            pass
        return took
    finally:
        stream.close()
        api.close()


async def _direct_first_token(engine: Engine, session_id: str) -> float:
    subscription = await engine.subscribe(EVENTS.name, session_id, after=0)
    try:
        begun = time.perf_counter()
        await RUN_START.call(engine, _start(session_id))
        took = None
        async for record in subscription:
            kind = record.data.get("type")
            if kind == "message_update" and took is None:
                took = time.perf_counter() - begun
            if kind == "agent_end":
                break
        assert took is not None
        return took
    finally:
        await subscription.aclose()


async def first_token(home: Path, samples: int) -> dict[str, Any]:
    workers = ["engine", "sessions", "policy", "orchestrator", "scripted", "gateway"]
    gateway: list[float] = []
    direct: list[float] = []
    async with hosted(home, workers) as (host, port):
        for i in range(samples + 5):  # the first five warm up
            async with asyncio.timeout(_STALL):
                through = await _gateway_first_token(host.engine, port, f"g{i}")
                bare = await _direct_first_token(host.engine, f"d{i}")
            if i >= 5:
                gateway.append(through)
                direct.append(bare)
    g, d = statistics.median(gateway), statistics.median(direct)
    return {
        "gateway_p50_ms": round(g * 1e3, 3),
        "direct_p50_ms": round(d * 1e3, 3),
        "added_ms": round((g - d) * 1e3, 3),
        "samples": samples,
    }


async def per_event(home: Path, events: int, rounds: int) -> dict[str, Any]:
    frame = {
        "schema_version": 1,
        "type": "message_update",
        "session_id": "e",
        "run_id": "run-bench",
        "event_id": "run-bench:1",
        "data": {"message_id": "m", "kind": "text", "delta": "word "},
    }
    through: list[float] = []
    bare: list[float] = []
    async with hosted(home, ["engine", "sessions", "policy", "gateway"]) as (host, port):
        await CREATE.call(host.engine, CreateRequest(session_id="e"))
        for _ in range(events):
            await host.engine.append(EVENTS.name, "e", frame)
        for _ in range(rounds + 1):  # the first round warms up
            async with asyncio.timeout(_STALL):
                through.append(await _read_through_gateway(port, events))
                bare.append(await _read_directly(host.engine, events))
    through, bare = through[1:], bare[1:]
    g, d = statistics.median(through) / events, statistics.median(bare) / events
    return {
        "gateway_us_per_event": round(g * 1e6, 2),
        "direct_us_per_event": round(d * 1e6, 2),
        "added_us": round((g - d) * 1e6, 2),
        "events": events,
        "rounds": rounds,
    }


async def _read_through_gateway(port: int, events: int) -> float:
    stream = await Connection.open(port)
    try:
        begun = time.perf_counter()
        stream.send("GET", "/v1/sessions/e/events")
        status, _ = await stream.head()
        assert status == 200, status
        seen = 0
        while seen < events:
            seen += (await stream.event()).count(b"\nevent: ")
        return time.perf_counter() - begun
    finally:
        stream.close()


async def _read_directly(engine: Engine, events: int) -> float:
    begun = time.perf_counter()
    subscription = await engine.subscribe(EVENTS.name, "e", after=0)
    seen = 0
    async for _ in subscription:
        seen += 1
        if seen == events:
            break
    await subscription.aclose()
    return time.perf_counter() - begun


# -- idle clients, against a gateway in a process of its own ------------------------------------


async def _child(home: Path) -> None:
    """``--child``: engine, sessions and a gateway; one session; the port on stdout; until
    stdin closes."""
    async with hosted(home, ["engine", "sessions", "policy", "gateway"]) as (host, port):
        await CREATE.call(host.engine, CreateRequest(session_id="idle"))
        print(port, flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)


def _rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


async def _open_streams(port: int, count: int) -> list[Connection]:
    opened = []
    for _ in range(count):
        stream = await Connection.open(port)
        stream.send("GET", "/v1/sessions/idle/events")
        opened.append(stream)
    for stream in opened:
        status, _ = await stream.head()
        assert status == 200, status
    return opened


async def idle_clients(home: Path, clients: int, *, settle: float) -> dict[str, Any]:
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        "--child",
        str(home),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert child.stdout is not None
        async with asyncio.timeout(_STALL):
            port = int(await child.stdout.readline())
        for stream in await _open_streams(port, 20):  # warm up: code paths, arenas
            stream.close()
        await asyncio.sleep(settle)
        before = _rss_bytes(child.pid)
        async with asyncio.timeout(_STALL):
            streams = await _open_streams(port, clients)
        await asyncio.sleep(settle)
        after = _rss_bytes(child.pid)
        for stream in streams:
            stream.close()
    finally:
        if child.stdin is not None:
            child.stdin.close()
        await asyncio.wait_for(child.wait(), _STALL)
    return {
        "clients": clients,
        "rss_before_bytes": before,
        "rss_after_bytes": after,
        "per_client_bytes": round((after - before) / clients),
        "per_client_kib": round((after - before) / clients / 1024, 1),
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--events", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--auth-samples", type=int, default=2000)
    parser.add_argument("--settle", type=float, default=1.0, help="seconds before each RSS reading")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        await _child(args.child)
        return
    before = machine()
    with tempfile.TemporaryDirectory(prefix="tr-gw-") as directory:
        root = Path(directory)
        for name in ("first", "events", "idle", "auth"):
            (root / name).mkdir()
        figures = {
            "auth": await auth_overhead(root / "auth", args.auth_samples),
            "first_token": await first_token(root / "first", args.samples),
            "per_event": await per_event(root / "events", args.events, args.rounds),
            "idle_clients": await idle_clients(root / "idle", args.clients, settle=args.settle),
        }
    measured = {
        "first_token_added_ms": figures["first_token"]["added_ms"],
        "per_event_added_us": figures["per_event"]["added_us"],
        "idle_client_kib": figures["idle_clients"]["per_client_kib"],
        "api_key_added_ms": figures["auth"]["api_key"]["added_ms"],
        "oidc_added_ms": figures["auth"]["oidc"]["added_ms"],
    }
    report = {
        "schema_version": SCHEMA_VERSION,
        "benchmark": "gateway",
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": before,
        "loadavg_1m_after": machine()["loadavg_1m"],
        "figures": figures,
        "targets": {
            name: {"target": TARGETS[name], "measured": value, "met": value <= TARGETS[name]}
            for name, value in measured.items()
        },
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
