"""A run's events with its subagents' events merged in: what a UI showing both reads.

A child run's events stay in its own session's group of ``agent::events`` (nothing is copied:
a subagent costs no second write per event). The parent's stream names each child as it starts
(``subagent_started`` carries ``child_session_id``); :func:`follow_tree` follows those, nested
to any depth, and yields every event of the tree as it arrives — each frame says its own
``session_id`` — until the root run and every child it started have ended.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from tackroom.contracts.events import EVENTS, AgentEnd, AgentEvent, SubagentStarted
from tackroom.engine.protocol import Engine

__all__ = ["follow_tree"]

_DONE = None


async def follow_tree(
    bus: Engine, session_id: str, *, after: int = 0, run_id: str | None = None
) -> AsyncIterator[AgentEvent]:
    """Every event of the run on ``session_id`` (from ``after``; until the ``agent_end`` of
    ``run_id`` when given, else the first) and of the runs of its subagents."""
    queue: asyncio.Queue[AgentEvent | None] = asyncio.Queue()
    followed: set[str] = {session_id}
    tasks: list[asyncio.Task[None]] = []

    async def follow(session: str, cursor: int, run: str | None) -> None:
        try:
            async for _, event in EVENTS.events(bus, session, after=cursor):
                if (
                    isinstance(event, SubagentStarted)
                    and event.data.child_session_id not in followed
                ):
                    child = event.data.child_session_id
                    followed.add(child)
                    tasks.append(group.create_task(follow(child, 0, event.data.child_run_id)))
                await queue.put(event)
                if isinstance(event, AgentEnd) and run in (None, event.run_id):
                    break
        finally:
            queue.put_nowait(_DONE)

    async with asyncio.TaskGroup() as group:
        tasks.append(group.create_task(follow(session_id, after, run_id)))
        finished = 0
        try:
            while finished < len(followed):
                item = await queue.get()
                if item is _DONE:
                    finished += 1
                    continue
                yield item
        finally:
            for task in tasks:
                task.cancel()
