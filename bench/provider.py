"""Provider benchmark: prints one JSON document (microseconds unless named) and the machine.

    python bench/provider.py [--deltas N] [--runs R] [--interval S] [--wire openai|anthropic]

For each provider worker (``openai``, ``anthropic``):

``above_sdk`` — the target figure. The SDK's ``create`` is replaced by a replay of SDK objects
parsed beforehand, so what is timed is everything **above the SDK's own parsing**: the worker's
adapter and sink, the channel, and (``events``) the orchestrator's reader, coalescer and the
``agent::events`` stream up to a subscriber (coalescing off: one event per delta).

- ``latency``: deltas yielded ``--interval`` apart; delay from the replay yielding a delta to
  the reader holding it, p50/p99;
- ``throughput``: deltas back to back; microseconds per delta from the first delta's arrival to
  the last one's.

``end_to_end`` — the same readers on the real path: a fake server in a **child process**
streams deltas in the wire format, each carrying the server's ``time.perf_counter()`` taken
before the write (CLOCK_MONOTONIC, one clock for every process), and the official SDK parses
them. ``sdk`` is the SDK alone (the floor); ``overhead_*`` subtract its p50. Readers take
turns run by run; on a loaded machine these figures are dominated by scheduling noise.

``startup`` — ``tackroom run`` on the scripted provider: from spawning the process to the
first byte of the answer, and which provider SDKs the run imported (it must import none);
``bench/startup.py`` measures it, and runs it alone.

Targets: <= 30 us p50 per delta above the SDK's parsing; <= 300 ms start-up to first token.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import startup
from _common import machine, p50_p99
from pydantic import TypeAdapter

from tackroom.contracts.events import EVENTS
from tackroom.contracts.messages import UserMessage
from tackroom.contracts.provider import ProviderRequest
from tackroom.contracts.turn import RUN_START, RunStartRequest
from tackroom.engine import Engine
from tackroom.runtime.config import HarnessConfig
from tackroom.runtime.host import Host
from tackroom.runtime.worker import WorkerContext
from tackroom.testing import memory_engine
from tackroom.testing.fake_llm import FakeAnthropicServer, FakeOpenAIServer, LoggedRequest, Reply
from tackroom.workers.anthropic.config import AnthropicConfig
from tackroom.workers.anthropic.worker import start_anthropic
from tackroom.workers.openai.config import OpenAIConfig
from tackroom.workers.openai.worker import start_openai

WIRES = ("openai", "anthropic")
KEY = "sk-bench"
SEP = "|"

# -- wire events (dicts), shared by the child server and the replay ------------------------------


def _openai_chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1767225600,
        "model": "bench", "system_fingerprint": "fp_bench",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }  # fmt: skip


def _head(wire: str) -> list[tuple[str, dict[str, Any]]]:
    if wire == "openai":
        return [("", _openai_chunk({"role": "assistant", "content": ""}))]
    message: dict[str, Any] = {
        "id": "msg_bench", "type": "message", "role": "assistant", "model": "bench",
        "content": [], "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 1},
    }  # fmt: skip
    start = {"index": 0, "content_block": {"type": "text", "text": ""}}
    return [
        ("message_start", {"type": "message_start", "message": message}),
        ("content_block_start", {"type": "content_block_start", **start}),
    ]


def _text(wire: str, text: str) -> tuple[str, dict[str, Any]]:
    if wire == "openai":
        return "", _openai_chunk({"content": text})
    delta = {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "text_delta", "text": text},
    }
    return "content_block_delta", delta


def _tail(wire: str) -> list[tuple[str, dict[str, Any]]]:
    if wire == "openai":
        return [("", _openai_chunk({}, "stop"))]
    delta = {"stop_reason": "end_turn", "stop_sequence": None}
    return [
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": delta, "usage": {"output_tokens": 5}}),
        ("message_stop", {"type": "message_stop"}),
    ]


def _sse(event: tuple[str, dict[str, Any]]) -> bytes:
    kind, data = event
    body = json.dumps(data, separators=(",", ":"))
    return (f"event: {kind}\n" if kind else "").encode() + f"data: {body}\n\n".encode()


# -- the child process: a fake server streaming stamped deltas ----------------------------------


def _source(wire: str, interval: float) -> Callable[[LoggedRequest], AsyncIterator[bytes]]:
    """As many deltas as the request's model says (``bench-N``), paced when ``interval``."""

    async def events(request: LoggedRequest) -> AsyncIterator[bytes]:
        count = int(str(request.model).rsplit("-", 1)[-1])
        for event in _head(wire):
            yield _sse(event)
        for _ in range(count):
            await asyncio.sleep(interval)
            yield _sse(_text(wire, f"{time.perf_counter():.9f}{SEP}"))
        for event in _tail(wire):
            yield _sse(event)
        if wire == "openai":
            yield b"data: [DONE]\n\n"

    return events


async def serve(wire: str, interval: float) -> None:
    server_class = FakeOpenAIServer if wire == "openai" else FakeAnthropicServer
    async with server_class(default=Reply(events=_source(wire, interval))) as server:
        print(server.base_url, flush=True)
        await asyncio.to_thread(sys.stdin.read)  # until the parent closes our stdin


class Child:
    """The fake server in its own process, so it does not share the measured event loop."""

    def __init__(self, wire: str, interval: float) -> None:
        self._process = subprocess.Popen(
            [sys.executable, __file__, "--serve", wire, "--interval", str(interval)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert self._process.stdout is not None
        self.base_url = self._process.stdout.readline().strip()

    def close(self) -> None:
        assert self._process.stdin is not None
        self._process.stdin.close()
        self._process.wait(timeout=10)


# -- the replay: the SDK's create() answering with objects parsed beforehand ---------------------


class _Replay:
    """Stands in for the SDK's ``AsyncStream``: yields parsed items, stamping each delta."""

    def __init__(self, items: list[tuple[bool, Any]], interval: float) -> None:
        self._items = items
        self._interval = interval
        self.stamps: list[float] = []

    async def __aenter__(self) -> _Replay:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def __aiter__(self) -> AsyncIterator[Any]:
        for is_delta, item in self._items:
            if is_delta:
                if self._interval:
                    await asyncio.sleep(self._interval)
                self.stamps.append(time.perf_counter())
            yield item


class Replaying:
    """Patches the SDK's ``create`` of ``wire`` to replay; keeps the last replay's stamps."""

    def __init__(self, wire: str, interval: float) -> None:
        self.wire = wire
        self.interval = interval
        self.last: _Replay | None = None
        if wire == "openai":
            from openai.types.chat import ChatCompletionChunk

            self._parse: Callable[[dict[str, Any]], Any] = ChatCompletionChunk.model_validate
        else:
            from anthropic.types import RawMessageStreamEvent

            self._parse = TypeAdapter(RawMessageStreamEvent).validate_python

    def items(self, count: int) -> list[tuple[bool, Any]]:
        parse = self._parse
        items = [(False, parse(data)) for _, data in _head(self.wire)]
        items += [(True, parse(_text(self.wire, f"{n}{SEP}")[1])) for n in range(count)]
        return items + [(False, parse(data)) for _, data in _tail(self.wire)]

    @contextlib.contextmanager
    def patched(self) -> Iterator[None]:
        if self.wire == "openai":
            from openai.resources.chat.completions import AsyncCompletions as resource
        else:
            from anthropic.resources.messages import AsyncMessages as resource  # type: ignore[assignment]
        original = resource.create

        async def create(_self: Any, **params: Any) -> _Replay:
            replay = _Replay(self.items(int(params["model"].rsplit("-", 1)[-1])), self.interval)
            self.last = replay
            return replay

        resource.create = create  # type: ignore[method-assign,assignment]
        try:
            yield
        finally:
            resource.create = original  # type: ignore[method-assign]


# -- readers: each returns the text pieces it got, with their arrival times ----------------------

Seen = list[tuple[float, str]]
Reader = Callable[[str], Awaitable[Seen]]


async def sdk_reader(wire: str, base_url: str) -> Reader:
    if wire == "openai":
        import openai

        oa_client = openai.AsyncOpenAI(base_url=base_url, api_key=KEY, max_retries=0)

        async def read_openai(model: str) -> Seen:
            seen: Seen = []
            stream = await oa_client.chat.completions.create(
                model=model, messages=[{"role": "user", "content": "go"}], stream=True
            )
            async for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.content:
                    seen.append((time.perf_counter(), chunk.choices[0].delta.content))
            return seen

        return read_openai
    import anthropic

    an_client = anthropic.AsyncAnthropic(base_url=base_url, api_key=KEY, max_retries=0)

    async def read_anthropic(model: str) -> Seen:
        seen: Seen = []
        stream = await an_client.messages.create(
            model=model, max_tokens=100, messages=[{"role": "user", "content": "go"}], stream=True
        )
        async for event in stream:
            if event.type == "content_block_delta" and event.delta.type == "text_delta":
                seen.append((time.perf_counter(), event.delta.text))
        return seen

    return read_anthropic


def worker_reader(engine: Engine, wire: str) -> Reader:
    async def read(model: str) -> Seen:
        channel = await engine.open_channel(capacity=256)
        request = ProviderRequest(model=model, messages=[UserMessage.text("go")])
        payload = {**request.model_dump(mode="json"), "writer": channel.ref.to_json()}
        seen: Seen = []

        async def frames() -> None:
            async for frame in channel:
                if frame["type"] == "text_delta":
                    seen.append((time.perf_counter(), frame["delta"]))

        reader = asyncio.create_task(frames())
        await engine.trigger(f"provider::{wire}::stream", payload, timeout=120)
        await reader
        await channel.aclose()
        return seen

    return read


def events_reader(engine: Engine, wire: str) -> Reader:
    async def read(model: str) -> Seen:
        session = f"s-{uuid.uuid4().hex[:10]}"
        subscription = await engine.subscribe(EVENTS.name, session)
        seen: Seen = []
        try:
            request = RunStartRequest(
                session_id=session, provider=wire, model=model, mode="ask",
                messages=[UserMessage.text("go")], max_turns=1,
            )  # fmt: skip
            await RUN_START.call(engine, request)
            async for record in subscription:
                event = record.data
                if event["type"] == "message_update" and event["data"]["kind"] == "text":
                    seen.append((time.perf_counter(), event["data"]["delta"]))
                elif event["type"] == "agent_end":
                    break
        finally:
            await subscription.aclose()
        return seen

    return read


# -- harness set-ups -----------------------------------------------------------------------------


def _section(wire: str, base_url: str) -> dict[str, Any]:
    return {"profiles": {wire: {"base_url": base_url, "api_key_env": "BENCH_KEY"}}}


@contextlib.asynccontextmanager
async def worker_engine(wire: str, base_url: str) -> AsyncIterator[Engine]:
    """An engine serving only the provider worker."""
    environ = {"BENCH_KEY": KEY}
    async with memory_engine() as engine:
        if wire == "openai":
            config: Any = OpenAIConfig.model_validate(_section(wire, base_url))
            ctx: WorkerContext[Any] = WorkerContext(engine=engine, name=wire, config=config)
            await start_openai(ctx, environ=environ)
        else:
            config = AnthropicConfig.model_validate(_section(wire, base_url))
            ctx = WorkerContext(engine=engine, name=wire, config=config)
            await start_anthropic(ctx, environ=environ)
        try:
            yield engine
        finally:
            await ctx.close()


def agent_host(wire: str, base_url: str) -> Host:
    """A whole agent harness, coalescing off (one ``message_update`` per delta)."""
    os.environ["BENCH_KEY"] = KEY
    return Host.from_config(
        HarnessConfig.model_validate(
            {
                "schema_version": 1,
                "engine": "embedded::memory:",
                "workers": ["engine", "sessions", "orchestrator", wire],
                "worker_config": {
                    "orchestrator": {"coalesce_seconds": 0.0, "coalesce_chars": 1},
                    wire: _section(wire, base_url),
                },
            }
        )
    )


# -- figures -------------------------------------------------------------------------------------


def summarize(samples: list[float]) -> dict[str, float]:
    p50, p99 = p50_p99(samples)
    return {"p50_us": round(p50 * 1e6, 1), "p99_us": round(p99 * 1e6, 1), "samples": len(samples)}


def _rate(seen: Seen) -> float:
    return (seen[-1][0] - seen[0][0]) / (len(seen) - 1)


def _stamped_delays(seen: Seen) -> list[float]:
    """Arrival minus the server's stamp, for every stamp in each (maybe coalesced) piece."""
    return [at - float(s) for at, text in seen for s in text.split(SEP) if s]


def _indexed_delays(seen: Seen, stamps: list[float]) -> list[float]:
    """Arrival minus the replay's stamp of each delta (pieces hold ``n|`` indexes)."""
    return [at - stamps[int(n)] for at, text in seen for n in text.split(SEP) if n]


async def above_sdk(wire: str, deltas: int, runs: int, interval: float) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for mode, pace in (("latency", interval), ("throughput", 0.0)):
        replaying = Replaying(wire, pace)
        delays: dict[str, list[float]] = {"worker": [], "events": []}
        rates: dict[str, list[float]] = {"worker": [], "events": []}
        with replaying.patched():
            async with worker_engine(wire, "http://127.0.0.1:9/unused") as engine:
                readers = {"worker": worker_reader(engine, wire)}
                async with agent_host(wire, "http://127.0.0.1:9/unused") as host:
                    readers["events"] = events_reader(host.engine, wire)
                    for read in readers.values():
                        await read("bench-50")  # warm up
                    for _ in range(runs):
                        for name, read in readers.items():
                            seen = await read(f"bench-{deltas}")
                            assert replaying.last is not None
                            delays[name] += _indexed_delays(seen, replaying.last.stamps)
                            rates[name].append(_rate(seen))
        if mode == "latency":
            out[mode] = {name: summarize(samples) for name, samples in delays.items()}
        else:
            out[mode] = {
                name: {"us_per_delta": round(statistics.median(r) * 1e6, 2), "runs": len(r)}
                for name, r in rates.items()
            }
    return out


async def end_to_end(wire: str, deltas: int, runs: int, interval: float) -> dict[str, Any]:
    child = Child(wire, interval)
    delays: dict[str, list[float]] = {"sdk": [], "worker": [], "events": []}
    try:
        readers = {"sdk": await sdk_reader(wire, child.base_url)}
        async with worker_engine(wire, child.base_url) as engine:
            readers["worker"] = worker_reader(engine, wire)
            async with agent_host(wire, child.base_url) as host:
                readers["events"] = events_reader(host.engine, wire)
                for read in readers.values():
                    await read("bench-20")  # warm up: connections, imports, caches
                for _ in range(runs):
                    for name, read in readers.items():
                        delays[name] += _stamped_delays(await read(f"bench-{deltas}"))
    finally:
        child.close()
    figures: dict[str, Any] = {name: summarize(samples) for name, samples in delays.items()}
    base = figures["sdk"]["p50_us"]
    for name in ("worker", "events"):
        figures[f"overhead_{name}_p50_us"] = round(figures[name]["p50_us"] - base, 1)
    return figures


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--deltas", type=int, default=500)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--interval", type=float, default=0.001, help="seconds between deltas")
    parser.add_argument("--startup-samples", type=int, default=5)
    parser.add_argument("--wire", choices=WIRES, action="append", help="default: both")
    parser.add_argument("--serve", choices=WIRES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        await serve(args.serve, args.interval)
        return
    report: dict[str, Any] = {
        "benchmark": "provider",
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "deltas": args.deltas,
        "runs": args.runs,
        "interval_s": args.interval,
        "targets": {"above_sdk_p50_us": 30, "first_token_ms": 300},
    }
    for wire in args.wire or WIRES:
        report[wire] = {
            "above_sdk": await above_sdk(wire, args.deltas, args.runs, args.interval),
            "end_to_end": await end_to_end(wire, args.deltas, args.runs, args.interval),
        }
    report["startup"] = startup.measure(args.startup_samples)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
