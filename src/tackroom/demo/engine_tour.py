"""The engine tour: one worker, a trigger, grouped queue messages, compare-and-set, a stream
subscription and a state trigger, narrated on stdout. Every wait has a deadline; no sleeps.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any, TextIO

from pydantic import BaseModel

from tackroom.contracts.bus import Function
from tackroom.contracts.engine import FUNCTIONS_LIST, EmptyRequest
from tackroom.engine.errors import FunctionNotFound, RevisionConflict
from tackroom.engine.factory import open_engine
from tackroom.runtime.host import Host
from tackroom.runtime.worker import WorkerConfig, WorkerContext, WorkerSpec
from tackroom.workers.engine.worker import WORKER as ENGINE_WORKER

__all__ = ["run_demo"]

WAIT = 5.0


class GreeterConfig(WorkerConfig):
    greeting: str = "Hello"


class HelloRequest(BaseModel):
    name: str


class HelloResponse(BaseModel):
    message: str


HELLO: Function[HelloRequest, HelloResponse] = Function(
    "greet::hello", HelloRequest, HelloResponse, description="Greet someone by name."
)
"""The greeter's contract: both sides import this descriptor (here the tour triggers the id)."""


class _Observed:
    """What the demo worker's handlers saw, so the narrator can wait for it."""

    def __init__(self) -> None:
        self.orders: dict[str, list[int]] = defaultdict(list)
        self.orders_done = asyncio.Event()
        self.expected_orders = 0
        self.profile_events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()


def _greeter(observed: _Observed) -> WorkerSpec[GreeterConfig]:
    async def start(ctx: WorkerContext[GreeterConfig]) -> None:
        async def hello(request: HelloRequest) -> HelloResponse:
            return HelloResponse(message=f"{ctx.config.greeting}, {request.name}!")

        async def process_order(payload: dict[str, Any]) -> None:
            observed.orders[payload["customer"]].append(payload["n"])
            if sum(map(len, observed.orders.values())) == observed.expected_orders:
                observed.orders_done.set()

        async def on_profile(payload: dict[str, Any]) -> None:
            await observed.profile_events.put(payload)

        await ctx.serve(HELLO, hello)
        await ctx.register_function("orders::process", process_order, description="Take an order.")
        await ctx.register_function("profiles::changed", on_profile, description="Profile hook.")
        await ctx.add_state_trigger("profiles", "profiles::changed")

    return WorkerSpec(
        name="greeter", description="The demo worker.", config_model=GreeterConfig, start=start
    )


async def run_demo(*, out: TextIO | None = None) -> int:
    def say(text: str = "") -> None:
        print(text, file=out or sys.stdout, flush=True)

    with tempfile.TemporaryDirectory(prefix="tackroom-demo-") as tmp:
        db = Path(tmp) / "engine.db"
        observed = _Observed()
        host = Host(
            engine=open_engine(f"embedded:{db}"), workers=[ENGINE_WORKER, _greeter(observed)]
        )
        say(f"tackroom demo: an embedded engine in {db}")
        async with host:
            engine = host.engine
            say(f"  workers started: {', '.join(host.worker_names)}")

            say("\n1. Functions: one primitive, trigger(function_id, payload)")
            result = await engine.trigger("greet::hello", {"name": "Ada"}, timeout=WAIT)
            say(f'  greet::hello {{"name": "Ada"}} -> {json.dumps(result)}')
            try:
                await engine.trigger("greet::helo", {"name": "Ada"}, timeout=WAIT)
            except FunctionNotFound as exc:
                say(f"  greet::helo -> FunctionNotFound, suggestions {exc.suggestions}")

            say("\n2. Queues: durable, at least once, one at a time per group")
            customers = ["ada", "grace", "ada", "grace", "ada", "grace"]
            observed.expected_orders = len(customers)
            counts: dict[str, int] = defaultdict(int)
            for customer in customers:
                counts[customer] += 1
                await engine.enqueue(
                    "orders::process",
                    {"customer": customer, "n": counts[customer]},
                    queue="orders",
                    group=customer,
                )
            await asyncio.wait_for(observed.orders_done.wait(), WAIT)
            for customer, seen in sorted(observed.orders.items()):
                say(f"  group {customer}: delivered in order {seen}")

            say("\n3. State: every value has a revision; compare-and-set catches lost updates")
            first = await engine.set_state("counters", "visits", 1)
            say(f"  counters/visits = 1 at revision {first.revision}")
            second = await engine.set_state(
                "counters", "visits", 2, expected_revision=first.revision
            )
            say(f"  writer A: set 2 expecting {first.revision} -> revision {second.revision}")
            try:
                await engine.set_state("counters", "visits", 99, expected_revision=first.revision)
            except RevisionConflict as exc:
                say(f"  writer B: set 99 expecting {first.revision} -> {exc}")

            say("\n4. Streams: append, subscribe, resume from a cursor")
            subscription = await engine.subscribe("agent::events", "session-1")
            try:
                for text in ("thinking", "calling a tool", "done"):
                    await engine.append("agent::events", "session-1", {"delta": text})
                for _ in range(3):
                    record = await asyncio.wait_for(anext(subscription), WAIT)
                    say(f"  live  seq {record.seq}: {json.dumps(record.data)}")
            finally:
                await subscription.aclose()
            resumed = await engine.read("agent::events", "session-1", after=1)
            say(f"  a client that saw seq 1 resumes with {[r.seq for r in resumed]}")

            say("\n5. State triggers: a write in a scope calls a function")
            await engine.set_state("profiles", "ada", {"lang": "en"})
            event = await asyncio.wait_for(observed.profile_events.get(), WAIT)
            say(
                f"  profiles/{event['key']} {event['event']} at revision {event['revision']}: "
                f"{json.dumps(event['old_value'])} -> {json.dumps(event['new_value'])}"
            )

            say(f"\n6. The catalog is on the bus too ({FUNCTIONS_LIST.id})")
            catalog = await FUNCTIONS_LIST.call(engine, EmptyRequest(), timeout=WAIT)
            ids = sorted(entry.function_id for entry in catalog.functions)
            say(f"  {len(ids)} functions: {', '.join(ids)}")
        say("\nshut down cleanly: registrations removed, tasks awaited, engine closed")
    return 0
