"""A ``sleep`` for :class:`~tackroom.testing.ScriptedProvider` that pauses a stream mid-answer."""

from __future__ import annotations

import asyncio

__all__ = ["HeldSleep"]


class HeldSleep:
    """Returns at once, except on call ``at``, which waits until :attr:`release` is set.

    The provider sleeps before each frame of a turn with ``delay_between_frames``, so
    ``ScriptedProvider(script, sleep=HeldSleep(at=4))`` sends the start frame and three more, then
    holds the stream (:attr:`reached` is set) until the test releases it: a model that pauses
    mid-answer, for as long as the test needs, with no wall-clock timing.
    """

    def __init__(self, *, at: int) -> None:
        self.calls = 0
        self.at = at
        self.reached = asyncio.Event()
        self.release = asyncio.Event()

    async def __call__(self, seconds: float) -> None:
        self.calls += 1
        if self.calls == self.at:
            self.reached.set()
            await self.release.wait()
