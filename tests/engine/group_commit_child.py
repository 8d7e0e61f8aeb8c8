"""Child process of the group-commit crash test: dies in the middle of a shared transaction.

Run as ``python group_commit_child.py DATABASE WRITERS CRASH_AT``: it stores ``before``, then
ends ``WRITERS`` units of work together (one batch) and exits at once, as a crash would, when
the batch's ``CRASH_AT``-th INSERT is about to run — after the writes of the units before it.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

from tackroom.engine.embedded import EmbeddedEngine

CRASH_CODE = 9


async def main(path: Path, writers: int, crash_at: int) -> None:
    engine = EmbeddedEngine(path=path)
    await engine.start()
    await engine.set_state("t", "before", 1)
    await engine.append("s", "before", 1)
    store = engine._store
    assert store is not None
    db: Any = store._db  # the crash goes in the connection
    execute = db.execute
    inserts = 0

    def crashing(sql: str, parameters: Any = (), /) -> Any:
        nonlocal inserts
        if sql.startswith("INSERT"):
            inserts += 1
            if inserts == crash_at:
                os._exit(CRASH_CODE)
        return execute(sql, parameters)

    gate = asyncio.Event()

    async def unit(index: int) -> None:
        async with engine.transaction():
            await engine.set_state("t", f"k{index}", index)
            await engine.append("s", f"g{index}", index)
            await engine.enqueue("test::nobody", index, queue="q")
            await gate.wait()

    tasks = [asyncio.create_task(unit(i)) for i in range(writers)]
    await asyncio.sleep(0.01)
    db.execute = crashing
    gate.set()
    await asyncio.gather(*tasks)
    sys.exit("the batch committed: the crash never came")


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])))
