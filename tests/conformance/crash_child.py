"""Child process of the crash test: write durable data, take a delivery, then hang.

Run as ``python crash_child.py ENGINE_URL``. It prints ``READY <message_id> <attempt>`` once its
handler holds the queued message, then sleeps until the parent kills it with SIGKILL.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from tackroom.engine import QueueConfig, current_invocation, open_engine

MARKER = "READY"
QUEUE = "crash"
FUNCTION = "crash::work"
# A lease longer than the parent needs to kill us, short enough for NATS to redeliver quickly.
CRASH_QUEUE = QueueConfig(
    max_deliveries=5, visibility_timeout=3.0, backoff_initial=0.01, backoff_max=0.05
)


async def main(url: str) -> None:
    engine = open_engine(url)
    await engine.start()
    await engine.configure_queue(QUEUE, CRASH_QUEUE)
    await engine.set_state("crash", "k", {"v": 1})
    await engine.set_state("crash", "k", {"v": 2})
    for i in range(3):
        await engine.append("crash", "g", {"i": i})

    async def hold(payload: Any) -> Any:
        invocation = current_invocation()
        assert invocation is not None
        print(f"{MARKER} {invocation.message_id} {invocation.attempt}", flush=True)
        await asyncio.Event().wait()

    await engine.enqueue(FUNCTION, {"job": 1}, queue=QUEUE)
    await engine.register_function(FUNCTION, hold)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
