"""Cron schedules: 5 fields, or 6 with seconds first."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime

from tackroom.engine.errors import InvalidSchedule
from tackroom.engine.functions import LocalRegistration

__all__ = ["CronSchedule", "cron_registration"]


class CronSchedule:
    def __init__(self, expression: str) -> None:
        fields = expression.split()
        if len(fields) not in (5, 6):
            raise InvalidSchedule(
                f"cron schedule {expression!r}: expected 5 fields, or 6 with seconds first;"
                f" got {len(fields)}"
            )
        self.expression = expression
        self._seconds_first = len(fields) == 6
        from croniter import croniter

        try:
            croniter(expression, second_at_beginning=self._seconds_first)
        except (ValueError, KeyError) as exc:
            raise InvalidSchedule(f"cron schedule {expression!r}: {exc}") from None

    def next_after(self, moment: datetime) -> datetime:
        """The first fire time strictly after ``moment`` (an aware datetime)."""
        from croniter import croniter

        it = croniter(self.expression, moment, second_at_beginning=self._seconds_first)
        fire: datetime = it.get_next(datetime)
        return fire

    async def fires(self) -> AsyncIterator[str]:
        """Each fire time in turn (ISO format), given when it comes: forever."""
        while True:
            now = datetime.now(UTC)
            fire = self.next_after(now)
            await asyncio.sleep((fire - now).total_seconds())
            yield fire.isoformat()

    def payload(self, fired_at: str) -> dict[str, str]:
        """What the function a cron trigger calls is given for the fire at ``fired_at``."""
        return {"schedule": self.expression, "fired_at": fired_at}

    def dedupe_key(self, function_id: str, fired_at: str) -> str:
        """One call of ``function_id`` for the fire at ``fired_at``, however often enqueued."""
        return f"cron:{function_id}:{self.expression}:{fired_at}"


def cron_registration(
    tasks: dict[str, asyncio.Task[None]],
    function_id: str,
    worker: str,
    start: Callable[[], asyncio.Task[None]],
) -> LocalRegistration:
    """A cron trigger's registration: the task ``start`` gives runs it, kept in ``tasks`` by
    registration id; unregistering cancels it."""

    async def remove(registration: LocalRegistration) -> None:
        task = tasks.pop(registration.id, None)
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    registration = LocalRegistration(
        function_id=function_id, handler=None, worker=worker, on_unregister=remove
    )
    tasks[registration.id] = start()
    return registration
