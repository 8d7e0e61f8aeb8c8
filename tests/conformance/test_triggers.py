"""Triggers: state, stream and cron triggers call a function id with a documented payload."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest

from tackroom.engine import Engine, InvalidSchedule, InvalidUpdate, RevisionConflict
from tackroom.testing import Call, RecordingHandler

EVERY_SECOND = "* * * * * *"


async def test_state_trigger_payloads_for_set_update_delete(engine: Engine) -> None:
    handler = RecordingHandler()
    await engine.register_function("on::user", handler)
    await engine.add_state_trigger("users", "on::user")

    created = await engine.set_state("users", "ada", {"n": 1})
    updated = await engine.update_state(
        "users", "ada", [{"op": "increment", "path": ["n"], "value": 1}]
    )
    await engine.delete_state("users", "ada")

    calls = await handler.wait_for_calls(3)
    assert calls[0].payload == {
        "scope": "users",
        "key": "ada",
        "event": "set",
        "old_value": None,
        "new_value": {"n": 1},
        "revision": created.revision,
    }
    assert calls[1].payload == {
        "scope": "users",
        "key": "ada",
        "event": "update",
        "old_value": {"n": 1},
        "new_value": {"n": 2},
        "revision": updated.revision,
    }
    deleted = calls[2].payload
    assert {k: deleted[k] for k in ("scope", "key", "event", "old_value", "new_value")} == {
        "scope": "users",
        "key": "ada",
        "event": "delete",
        "old_value": {"n": 2},
        "new_value": None,
    }
    assert isinstance(deleted["revision"], int)
    assert all(c.kind == "state_trigger" for c in calls)
    assert all(c.invocation and c.invocation.function_id == "on::user" for c in calls)


async def test_state_trigger_ignores_other_scopes(engine: Engine) -> None:
    handler = RecordingHandler()
    await engine.register_function("on::user", handler)
    await engine.add_state_trigger("users", "on::user")

    await engine.set_state("users2", "ada", 1)
    await engine.set_state("other", "ada", 2)
    await engine.set_state("users", "fence", 3)

    await handler.wait_for_calls(1)
    # Not a race: other-scope deliveries, if any, would be queued alongside the fence.
    await asyncio.sleep(0.3)
    assert [(p["scope"], p["key"]) for p in handler.payloads] == [("users", "fence")]


async def test_failed_writes_fire_no_state_trigger(engine: Engine) -> None:
    handler = RecordingHandler()
    await engine.register_function("on::doc", handler)
    await engine.add_state_trigger("docs", "on::doc")
    first = await engine.set_state("docs", "d1", {"name": "Ada"})
    await handler.wait_for_calls(1)

    with pytest.raises(RevisionConflict):
        await engine.set_state("docs", "d1", {"name": "x"}, expected_revision=first.revision + 9)
    with pytest.raises(InvalidUpdate):
        await engine.update_state("docs", "d1", [{"op": "append", "path": ["name"], "value": 1}])
    with pytest.raises(RevisionConflict):
        await engine.delete_state("docs", "d1", expected_revision=first.revision + 9)
    await engine.set_state("docs", "fence", 1)

    await handler.wait_for_calls(2)
    await asyncio.sleep(0.2)  # not a race: gives a wrong engine time to deliver more
    assert [(p["key"], p["event"]) for p in handler.payloads] == [("d1", "set"), ("fence", "set")]


class SerialProbe:
    """A handler body that notices overlapping deliveries; early ones are slow on purpose."""

    def __init__(self, handler_calls: list[Call], value: Callable[[Any], int]) -> None:
        self.calls = handler_calls
        self.value = value
        self.finished: list[int] = []
        self.overlaps = 0

    async def __call__(self, call: Call) -> Any:
        if len(self.finished) != len(self.calls) - 1:
            self.overlaps += 1  # an earlier delivery of this key or group still runs
        if self.value(call.payload) < 3:
            await asyncio.sleep(0.05)  # a parallel engine would let later ones overtake
        self.finished.append(self.value(call.payload))


async def test_state_trigger_keeps_write_order_per_key(engine: Engine) -> None:
    handler = RecordingHandler()
    probe = SerialProbe(handler.calls, lambda payload: int(payload["new_value"]))
    handler.respond = probe
    await engine.register_function("on::counter", handler)
    await engine.add_state_trigger("counters", "on::counter")

    for i in range(10):
        await engine.set_state("counters", "c", i)

    calls = await handler.wait_for_finished(10)
    assert probe.finished == list(range(10))
    assert probe.overlaps == 0, "deliveries for one key ran concurrently"
    revisions = [c.payload["revision"] for c in calls]
    assert revisions == sorted(revisions)
    assert [c.payload["old_value"] for c in calls] == [None, *range(9)]


async def test_state_trigger_waits_for_its_function_to_register(engine: Engine) -> None:
    await engine.add_state_trigger("users", "on::late")
    await engine.set_state("users", "ada", {"n": 1})

    handler = RecordingHandler()
    await engine.register_function("on::late", handler)

    [call] = await handler.wait_for_calls(1)
    assert call.payload["new_value"] == {"n": 1}


async def test_unregistered_state_trigger_stops_firing(engine: Engine) -> None:
    handler = RecordingHandler()
    await engine.register_function("on::user", handler)
    registration = await engine.add_state_trigger("users", "on::user")
    await engine.set_state("users", "before", 1)
    await handler.wait_for_calls(1)

    await registration.unregister()
    await engine.set_state("users", "after", 2)

    await asyncio.sleep(0.3)  # not a race: gives a wrong engine time to fire
    assert [p["key"] for p in handler.payloads] == ["before"]


async def test_stream_trigger_payload_and_order(engine: Engine) -> None:
    handler = RecordingHandler()
    await engine.register_function("on::chat", handler)
    await engine.add_stream_trigger("chat", "on::chat")

    await engine.append("chat", "s1", {"text": "hi"})
    await engine.append("chat", "s1", {"text": "there"})
    await engine.append("other", "s1", {"text": "not mine"})
    await engine.append("chat", "s2", {"text": "hello"})

    calls = await handler.wait_for_calls(3)
    by_group = {
        group: [c.payload for c in calls if c.payload["group_id"] == group]
        for group in ("s1", "s2")
    }
    assert by_group["s1"] == [
        {"stream": "chat", "group_id": "s1", "seq": 1, "data": {"text": "hi"}},
        {"stream": "chat", "group_id": "s1", "seq": 2, "data": {"text": "there"}},
    ]
    assert by_group["s2"] == [
        {"stream": "chat", "group_id": "s2", "seq": 1, "data": {"text": "hello"}}
    ]
    assert all(c.kind == "stream_trigger" for c in calls)
    await asyncio.sleep(0.2)  # not a race: gives a wrong engine time to fire for "other"
    assert len(handler.calls) == 3


async def test_stream_trigger_keeps_append_order_per_group(engine: Engine) -> None:
    handler = RecordingHandler()
    probe = SerialProbe(handler.calls, lambda payload: int(payload["data"]))
    handler.respond = probe
    await engine.register_function("on::log", handler)
    await engine.add_stream_trigger("log", "on::log")

    for i in range(10):
        await engine.append("log", "g", i)

    calls = await handler.wait_for_finished(10)
    assert probe.finished == list(range(10))
    assert probe.overlaps == 0, "deliveries for one stream group ran concurrently"
    assert [c.payload["seq"] for c in calls] == list(range(1, 11))


async def test_cron_trigger_fires_every_second_and_stops_after_unregister(
    engine: Engine,
) -> None:
    handler = RecordingHandler()
    await engine.register_function("tick::second", handler)

    registration = await engine.add_cron_trigger(EVERY_SECOND, "tick::second")
    calls = await handler.wait_for_calls(2, timeout=10)

    for call in calls[:2]:
        assert call.kind == "cron"
        assert set(call.payload) == {"schedule", "fired_at"}
        assert call.payload["schedule"] == EVERY_SECOND
        fired_at = datetime.fromisoformat(call.payload["fired_at"])
        assert fired_at.utcoffset() == timedelta(0)
    first_fire = datetime.fromisoformat(calls[0].payload["fired_at"])
    second_fire = datetime.fromisoformat(calls[1].payload["fired_at"])
    assert second_fire > first_fire

    await registration.unregister()
    await asyncio.sleep(0.1)  # let a fire dispatched just before unregister() land
    fired = len(handler.calls)
    await asyncio.sleep(2.2)  # two more ticks would have fired by now
    assert len(handler.calls) == fired


async def test_five_field_cron_schedule_is_accepted(engine: Engine) -> None:
    await engine.register_function("tick::minute", RecordingHandler())
    registration = await engine.add_cron_trigger("*/5 * * * *", "tick::minute")
    await registration.unregister()


@pytest.mark.parametrize("schedule", ["not a cron", "* * *", "61 * * * *", "", "* * * * * * * *"])
async def test_invalid_cron_schedule_raises_invalid_schedule(engine: Engine, schedule: str) -> None:
    with pytest.raises(InvalidSchedule):
        await engine.add_cron_trigger(schedule, "tick::never")
