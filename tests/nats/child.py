"""A worker process for the multi-process NATS tests: ``python child.py MODE ENGINE_URL``.

Modes:
- ``serve``: serves ``mp::echo`` (answers with its pid) and ``mp::slow`` (sleeps, then answers);
- ``trigger``: serves ``mp::on_order`` and holds a state trigger on scope ``orders`` calling it;
  each delivery appends ``{"key", "pid"}`` to the stream ``seen``/``orders``;
- ``worker``: serves the queue function ``mp::job`` on queue ``mp``: the first delivery of a
  message prints ``HOLD <message_id>`` and hangs; a redelivery records itself in state ``done``;
- ``counter``: serves ``mp::echo``, ``mp::slow`` and the queue function ``mp::count``, which
  records each message id in state scope ``count``.

It prints ``READY <pid>`` once everything is registered, and exits cleanly on SIGTERM.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from typing import Any

from tackroom.engine import Engine, QueueConfig, current_invocation, open_engine

READY = "READY"
HOLD = "HOLD"
QUEUE = "mp"
MP_QUEUE = QueueConfig(
    max_deliveries=5, visibility_timeout=2.0, backoff_initial=0.05, backoff_max=0.2
)


async def echo(payload: Any) -> Any:
    return {"pid": os.getpid(), "payload": payload}


async def slow(payload: Any) -> Any:
    await asyncio.sleep(float(payload.get("seconds", 3.0)))
    return {"pid": os.getpid()}


async def serve(engine: Engine) -> None:
    await engine.register_function("mp::echo", echo, description="Echo with pid", worker="child")
    await engine.register_function("mp::slow", slow, worker="child")


async def trigger(engine: Engine) -> None:
    async def on_order(payload: Any) -> Any:
        await engine.append("seen", "orders", {"key": payload["key"], "pid": os.getpid()})

    await engine.register_function("mp::on_order", on_order, worker="child")
    await engine.add_state_trigger("orders", "mp::on_order", worker="child")


async def worker(engine: Engine) -> None:
    async def job(payload: Any) -> Any:
        invocation = current_invocation()
        assert invocation is not None
        if invocation.attempt == 1:
            print(f"{HOLD} {invocation.message_id}", flush=True)
            await asyncio.Event().wait()
        await engine.set_state(
            "done",
            str(payload["job"]),
            {"pid": os.getpid(), "attempt": invocation.attempt, "id": invocation.message_id},
        )

    await engine.configure_queue(QUEUE, MP_QUEUE)
    await engine.register_function("mp::job", job, worker="child")


async def counter(engine: Engine) -> None:
    async def count(payload: Any) -> Any:
        invocation = current_invocation()
        assert invocation is not None
        assert invocation.message_id is not None
        await engine.set_state("count", invocation.message_id, payload)

    await serve(engine)
    await engine.configure_queue(QUEUE, MP_QUEUE)
    await engine.register_function("mp::count", count, worker="child")


MODES = {"serve": serve, "trigger": trigger, "worker": worker, "counter": counter}


async def main(mode: str, url: str) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    engine = open_engine(url)
    await engine.start()
    try:
        await MODES[mode](engine)
        print(f"{READY} {os.getpid()}", flush=True)
        await stop.wait()
    finally:
        await engine.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
