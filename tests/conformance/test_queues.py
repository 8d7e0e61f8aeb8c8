"""Queues: delivery, retries, dead letters, redrive, visibility timeout, dedupe."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import Any

import pytest

from tackroom.engine import Engine, EngineUnavailable, FunctionError, InvalidPayload
from tackroom.testing import FAST_QUEUE, Call, RecordingHandler, wait_until


async def _fail_always(call: Call) -> Any:
    raise RuntimeError(f"boom on attempt {call.attempt}")


async def test_enqueue_delivers_with_a_queue_invocation(engine: Engine) -> None:
    await engine.configure_queue("jobs", FAST_QUEUE)
    handler = RecordingHandler()
    await engine.register_function("jobs::run", handler)

    message_id = await engine.enqueue("jobs::run", {"job": 1}, queue="jobs", group="session-1")

    assert isinstance(message_id, str)
    assert message_id
    [call] = await handler.wait_for_calls(1)
    assert call.payload == {"job": 1}
    assert call.invocation is not None
    assert call.invocation.function_id == "jobs::run"
    assert call.kind == "queue"
    assert call.attempt == 1
    assert call.message_id == message_id
    assert call.group == "session-1"


async def test_default_queue_and_no_group(engine: Engine) -> None:
    handler = RecordingHandler()
    await engine.register_function("jobs::run", handler)

    message_id = await engine.enqueue("jobs::run", [1, 2, 3])

    [call] = await handler.wait_for_calls(1)
    assert call.payload == [1, 2, 3]
    assert call.message_id == message_id
    assert call.group is None


async def test_enqueued_payload_is_a_copy(engine: Engine) -> None:
    handler = RecordingHandler()
    await engine.register_function("jobs::run", handler)
    payload = {"items": [1]}

    await engine.enqueue("jobs::run", payload)
    payload["items"].append(2)

    [call] = await handler.wait_for_calls(1)
    assert call.payload == {"items": [1]}


async def test_non_json_payload_raises_invalid_payload_and_enqueues_nothing(
    engine: Engine,
) -> None:
    await engine.configure_queue("jobs", FAST_QUEUE)
    handler = RecordingHandler()
    await engine.register_function("jobs::run", handler)

    with pytest.raises(InvalidPayload):
        await engine.enqueue("jobs::run", {"bad": object()}, queue="jobs", group="g")
    # A fence in the same group: had the bad message been stored, it would come first.
    await engine.enqueue("jobs::run", {"fence": True}, queue="jobs", group="g")

    await handler.wait_for_calls(1)
    assert handler.payloads == [{"fence": True}]


async def test_failed_delivery_is_retried_until_it_succeeds(engine: Engine) -> None:
    await engine.configure_queue("jobs", FAST_QUEUE)

    async def flaky(call: Call) -> Any:
        if call.attempt is not None and call.attempt < 3:
            raise RuntimeError("not yet")
        return "done"

    handler = RecordingHandler(flaky)
    await engine.register_function("jobs::flaky", handler)
    message_id = await engine.enqueue("jobs::flaky", {"n": 1}, queue="jobs")

    calls = await handler.wait_for_finished(3)

    assert [c.attempt for c in calls] == [1, 2, 3]
    assert {c.message_id for c in calls} == {message_id}
    assert all(c.payload == {"n": 1} for c in calls)
    assert await engine.list_dead_letters("jobs") == []


async def test_a_retry_gets_the_payload_as_enqueued(engine: Engine) -> None:
    await engine.configure_queue("jobs", FAST_QUEUE)

    async def spoil_then_fail(call: Call) -> Any:
        if call.attempt == 1:
            call.payload["items"].append("spoiled")
            raise RuntimeError("fail after mutating")
        return "ok"

    handler = RecordingHandler(spoil_then_fail)
    await engine.register_function("jobs::spoil", handler)
    await engine.enqueue("jobs::spoil", {"items": []}, queue="jobs")

    calls = await handler.wait_for_finished(2)
    assert calls[1].payload == {"items": []}


async def test_message_is_dead_lettered_after_max_deliveries(engine: Engine) -> None:
    await engine.configure_queue("jobs", FAST_QUEUE)  # max_deliveries=3
    handler = RecordingHandler(_fail_always)
    await engine.register_function("jobs::doomed", handler)

    message_id = await engine.enqueue("jobs::doomed", {"n": 1}, queue="jobs", group="g1")

    await wait_until(lambda: engine.list_dead_letters("jobs"))
    [dead] = await engine.list_dead_letters("jobs")
    assert dead.message_id == message_id
    assert dead.queue == "jobs"
    assert dead.function_id == "jobs::doomed"
    assert dead.payload == {"n": 1}
    assert dead.group == "g1"
    assert dead.attempts == 3
    assert "boom on attempt 3" in dead.last_error
    assert [c.attempt for c in handler.calls] == [1, 2, 3]


async def test_function_error_counts_as_a_failed_delivery(engine: Engine) -> None:
    await engine.configure_queue("jobs", dataclasses.replace(FAST_QUEUE, max_deliveries=2))

    async def refuse(call: Call) -> Any:
        raise FunctionError("bad_input", "cannot do it")

    await engine.register_function("jobs::refuse", RecordingHandler(refuse))
    await engine.enqueue("jobs::refuse", {}, queue="jobs")

    await wait_until(lambda: engine.list_dead_letters("jobs"))
    [dead] = await engine.list_dead_letters("jobs")
    assert dead.attempts == 2
    assert "cannot do it" in dead.last_error


async def test_redrive_puts_dead_letters_back_with_a_fresh_count(engine: Engine) -> None:
    await engine.configure_queue("jobs", dataclasses.replace(FAST_QUEUE, max_deliveries=2))
    healed = False

    async def until_healed(call: Call) -> Any:
        if not healed:
            raise RuntimeError("still broken")
        return "ok"

    handler = RecordingHandler(until_healed)
    await engine.register_function("jobs::fix", handler)
    message_id = await engine.enqueue("jobs::fix", {"n": 1}, queue="jobs")
    await wait_until(lambda: engine.list_dead_letters("jobs"))
    assert len(handler.calls) == 2

    healed = True
    assert await engine.redrive("jobs") == 1

    calls = await handler.wait_for_finished(3)
    assert calls[2].attempt == 1
    assert calls[2].message_id == message_id
    assert calls[2].payload == {"n": 1}
    assert await engine.list_dead_letters("jobs") == []


async def _dead_ids(engine: Engine, queue: str) -> set[str]:
    return {dead.message_id for dead in await engine.list_dead_letters(queue)}


async def test_redrive_selected_message_ids_only(engine: Engine) -> None:
    await engine.configure_queue("jobs", dataclasses.replace(FAST_QUEUE, max_deliveries=1))
    healed = False

    async def until_healed(call: Call) -> Any:
        if not healed:
            raise RuntimeError("still broken")
        return "ok"

    handler = RecordingHandler(until_healed)
    await engine.register_function("jobs::fix", handler)
    first = await engine.enqueue("jobs::fix", {"n": 1}, queue="jobs")
    second = await engine.enqueue("jobs::fix", {"n": 2}, queue="jobs")
    await wait_until(lambda: _has_dead(engine, "jobs", {first, second}))

    healed = True
    assert await engine.redrive("jobs", message_ids=[first]) == 1

    calls = await handler.wait_for_finished(3)
    assert (calls[2].message_id, calls[2].attempt) == (first, 1)
    assert await _dead_ids(engine, "jobs") == {second}


async def _has_dead(engine: Engine, queue: str, expected: set[str]) -> bool:
    return await _dead_ids(engine, queue) == expected


async def test_visibility_timeout_redelivers_an_overrunning_delivery(
    engine: Engine, backend: str
) -> None:
    await engine.configure_queue(
        "jobs", dataclasses.replace(FAST_QUEUE, visibility_timeout=0.3, max_deliveries=3)
    )

    async def stuck_first_time(call: Call) -> Any:
        if call.attempt == 1:
            await asyncio.Event().wait()
        return "ok"

    handler = RecordingHandler(stuck_first_time)
    await engine.register_function("jobs::slow", handler)
    message_id = await engine.enqueue("jobs::slow", {"n": 1}, queue="jobs")

    calls = await handler.wait_for_calls(2)

    assert [(c.message_id, c.attempt) for c in calls[:2]] == [(message_id, 1), (message_id, 2)]
    await wait_until(lambda: calls[1].finished)
    if backend == "embedded":  # embedded cancels the attempt that lost its lease
        await wait_until(lambda: calls[0].cancelled)


async def test_extend_visibility_keeps_the_lease(engine: Engine) -> None:
    await engine.configure_queue(
        "jobs", dataclasses.replace(FAST_QUEUE, visibility_timeout=0.3, max_deliveries=3)
    )

    async def long_job(call: Call) -> Any:
        assert call.invocation is not None
        for _ in range(8):  # 0.8 s in all, well past the 0.3 s lease
            await call.invocation.extend_visibility(1.0)
            await asyncio.sleep(0.1)
        return "done"

    handler = RecordingHandler(long_job)
    await engine.register_function("jobs::long", handler)
    await engine.enqueue("jobs::long", {}, queue="jobs")

    await handler.wait_for_finished(1)

    assert len(handler.calls) == 1
    assert not handler.calls[0].cancelled


async def test_dedupe_key_returns_the_first_id_and_runs_once(engine: Engine) -> None:
    await engine.configure_queue("jobs", FAST_QUEUE)
    handler = RecordingHandler()
    await engine.register_function("jobs::run", handler)

    first = await engine.enqueue("jobs::run", {"n": 1}, queue="jobs", group="g", dedupe_key="k")
    again = await engine.enqueue("jobs::run", {"n": 2}, queue="jobs", group="g", dedupe_key="k")
    # A fence in the same group: a duplicate would be delivered before it.
    await engine.enqueue("jobs::run", {"fence": True}, queue="jobs", group="g")

    assert again == first
    await handler.wait_for_finished(2)
    assert handler.payloads == [{"n": 1}, {"fence": True}]
    assert handler.calls[0].message_id == first

    # Still inside the window after delivery: the key keeps answering with the first id.
    late = await engine.enqueue("jobs::run", {"n": 3}, queue="jobs", group="g", dedupe_key="k")
    await engine.enqueue("jobs::run", {"fence": 2}, queue="jobs", group="g")
    assert late == first
    await handler.wait_for_calls(3)
    assert handler.payloads[2:] == [{"fence": 2}]


async def test_dedupe_key_is_per_queue(engine: Engine) -> None:
    handler = RecordingHandler()
    await engine.register_function("jobs::run", handler)

    in_a = await engine.enqueue("jobs::run", {"q": "a"}, queue="qa", dedupe_key="same")
    in_b = await engine.enqueue("jobs::run", {"q": "b"}, queue="qb", dedupe_key="same")

    assert in_a != in_b
    await handler.wait_for_calls(2)
    assert sorted(p["q"] for p in handler.payloads) == ["a", "b"]


async def test_message_waits_until_its_function_is_registered(engine: Engine) -> None:
    await engine.configure_queue("jobs", dataclasses.replace(FAST_QUEUE, max_deliveries=1))
    message_id = await engine.enqueue("late::fn", {"n": 1}, queue="jobs")
    # Not a race: this only gives a wrong engine time to fail or dead-letter the message.
    await asyncio.sleep(0.3)
    assert await engine.list_dead_letters("jobs") == []

    handler = RecordingHandler()
    await engine.register_function("late::fn", handler)

    [call] = await handler.wait_for_calls(1)
    assert call.message_id == message_id
    assert call.payload == {"n": 1}
    assert call.attempt == 1


async def test_a_delivery_failed_by_an_unavailable_engine_is_retried_and_said(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    """The known cause is said in one warning line (no traceback); the retry follows backoff."""
    await engine.configure_queue("jobs", FAST_QUEUE)

    async def respond(call: Call) -> Any:
        if call.attempt == 1:
            raise EngineUnavailable("the store went away")
        return None

    handler = RecordingHandler(respond)
    await engine.register_function("jobs::run", handler)
    await engine.enqueue("jobs::run", {}, queue="jobs")

    calls = await handler.wait_for_calls(2)
    assert [call.attempt for call in calls] == [1, 2]
    said = [
        record
        for record in caplog.records
        if record.levelno == logging.WARNING and "jobs::run" in record.getMessage()
    ]
    assert len(said) == 1
    assert said[0].exc_info is None
    assert "the store went away" in said[0].getMessage()
    assert "retrying in" in said[0].getMessage()
