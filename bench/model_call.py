"""Model-call path benchmark: what hooks, failover and text tool calling cost when unused.

    python bench/model_call.py [--quick]

Each model call of a turn goes through ``ModelCall.call`` (before hooks, the model chain, the
provider's tool-calling mode, after hooks) around ``ModelCaller.stream``. This bench replaces
the stream by a stub that returns a finished message at once, and times, interleaved in rounds:

- ``bare``: the request built and the stub streamed, as the turn did before this path existed;
- ``unsubscribed``: ``ModelCall.call`` with a hook subscription map that has no subscribers, a
  one-model chain, a native-tools provider (its profile cached).

``overhead_us`` is the difference of their p50s (per model call, in process, no I/O). The engine
side is unchanged either way: ``bench/turn.py --only operations`` counts the same engine calls,
triggers and SQL statements per turn. ``text_parse_us`` is the p50 of reading the tool calls of a
typical answer (``tackroom.kit.texttools.parse_calls``), what a ``tool_calling: text`` model
adds per answer besides its tokens.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from _common import machine

from tackroom.contracts.events import EventData
from tackroom.contracts.messages import AgentMessage, AssistantMessage, TextBlock, UserMessage
from tackroom.contracts.provider import ProviderRequest
from tackroom.kit.hooks.modelcalls import ModelCallHooks
from tackroom.kit.hooks.publish import HookSubscriptions
from tackroom.kit.live import NO_LIVE, LiveSink
from tackroom.kit.texttools import format_call, parse_calls
from tackroom.testing import memory_engine
from tackroom.workers.orchestrator.modelcall import ModelCall, ProfileCache
from tackroom.workers.orchestrator.record import ToolOffer, TurnRecord
from tackroom.workers.orchestrator.streaming import Streamed, base_request

TARGET_OVERHEAD_US = 20.0


class _StubStream:
    """Stands in for ``ModelCaller``: a finished message, no channel, no provider."""

    def live(self, record: TurnRecord) -> LiveSink:
        return NO_LIVE

    async def stream(
        self, provider: str, request: ProviderRequest, emit: Any, **_: Any
    ) -> Streamed:
        message = AssistantMessage(content=[TextBlock(text="done")], provider=provider)
        return Streamed(message, shown=True, stream_id="s")


async def _no_event(key: str, data: EventData) -> None:
    return None


def _record() -> TurnRecord:
    tools = [
        ToolOffer(name=f"tool_{i}", function_id=f"tool::{i}", parameters={"type": "object"})
        for i in range(10)
    ]
    return TurnRecord(
        session_id="s",
        run_id="r",
        provider="p",
        model="m",
        state="assistant_streaming",
        tools=tools,
    )


async def _p50_us(call: Callable[[], Awaitable[Any]], count: int) -> float:
    samples = []
    for _ in range(count):
        start = time.perf_counter()
        await call()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e6


async def run(*, rounds: int, per_round: int) -> dict[str, Any]:
    record, stub = _record(), _StubStream()
    messages: list[AgentMessage] = [UserMessage.text("hello")]
    async with memory_engine() as engine:

        async def profile(_: Any) -> dict[str, str]:
            return {"provider": "p", "tool_calling": "native"}

        await engine.register_function("provider::p::profile", profile)
        profiles = ProfileCache(engine)
        await profiles.tool_calling("p")  # what the first call of a run asks, then keeps
        hooks = HookSubscriptions(engine)
        await hooks.load()  # no subscriber: the map is empty
        path = ModelCall(stub, hooks=ModelCallHooks(hooks), profiles=profiles)  # type: ignore[arg-type]

        async def bare() -> None:
            request = base_request(record, messages)
            await stub.stream("p", request, _no_event, message_id=record.entry_id("t1-a"))

        async def unsubscribed() -> None:
            await path.call(record, messages, _no_event)

        figures: dict[str, list[float]] = {"bare": [], "unsubscribed": []}
        for _ in range(rounds):
            figures["bare"].append(await _p50_us(bare, per_round))
            figures["unsubscribed"].append(await _p50_us(unsubscribed, per_round))
    bare_us = round(statistics.median(figures["bare"]), 2)
    path_us = round(statistics.median(figures["unsubscribed"]), 2)
    answer = AssistantMessage(
        content=[TextBlock(text="Reading it.\n" + format_call("tool_1", {"path": "notes.txt"}))]
    )
    names = [tool.name for tool in record.tools]

    async def parse() -> None:
        parse_calls(answer, names)

    parse_us = await _p50_us(parse, per_round * 2)
    overhead = round(path_us - bare_us, 2)
    return {
        "bench": "model_call",
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "results": {
            "bare_p50_us": round(bare_us, 2),
            "unsubscribed_p50_us": round(path_us, 2),
            "overhead_us": overhead,
            "text_parse_us": round(parse_us, 2),
            "rounds": rounds,
            "calls_per_round": per_round,
            "targets": {
                "overhead_us": {
                    "target": f"<= {TARGET_OVERHEAD_US:g}",
                    "value": overhead,
                    "pass": overhead <= TARGET_OVERHEAD_US,
                }
            },
            "measured": "p50 per call of each variant per round, interleaved; the median of the"
            " rounds; in process, stub stream, no engine I/O",
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    args = parser.parse_args()
    rounds, per_round = (2, 200) if args.quick else (10, 3000)
    print(json.dumps(asyncio.run(run(rounds=rounds, per_round=per_round)), indent=2))


if __name__ == "__main__":
    main()
