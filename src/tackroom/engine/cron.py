"""Cron schedules: 5 fields, or 6 with seconds first."""

from __future__ import annotations

from datetime import datetime

from tackroom.engine.errors import InvalidSchedule

__all__ = ["CronSchedule"]


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
