"""Withdrawing a stream trigger while JetStream does not answer (still starting after a
restart): the failure is an ``EngineUnavailable``, so a closing worker says so in one line
instead of logging a nats-py traceback (the NATS outage fault test counted them)."""

from __future__ import annotations

from typing import Any

import nats.errors
import pytest
from nats.js.manager import JetStreamManager

from tackroom.engine import EngineUnavailable
from tackroom.testing import running_engine


async def _no_answer(self: JetStreamManager, stream: str, consumer: str) -> bool:
    raise nats.errors.TimeoutError


async def test_a_relay_consumer_jetstream_does_not_delete_is_unavailable(
    nats_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def handler(payload: Any) -> None:
        return None

    async with running_engine(nats_url) as engine:
        await engine.register_function("withdraw::on", handler)
        registration = await engine.add_stream_trigger("withdraw-stream", "withdraw::on")
        monkeypatch.setattr(JetStreamManager, "delete_consumer", _no_answer)
        with pytest.raises(EngineUnavailable, match="NATS is unreachable: TimeoutError"):
            await registration.unregister()
