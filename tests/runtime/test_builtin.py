"""The built-in ``engine`` worker, called the way every other worker calls it: engine.trigger."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from tackroom.contracts.engine import StateSetRequest, StateValue
from tackroom.engine import Engine, EngineError, InvocationError, open_engine
from tackroom.engine.jsonvalue import MAX_DEPTH
from tackroom.runtime import Host
from tackroom.workers.engine.worker import WORKER


@pytest.fixture
async def engine() -> AsyncIterator[Engine]:
    async with Host(engine=open_engine("embedded::memory:"), workers=[WORKER]) as host:
        yield host.engine


async def call(engine: Engine, function_id: str, payload: Any = None) -> Any:
    return await engine.trigger(function_id, payload, timeout=5)


async def test_state_get_set_and_compare_and_set(engine: Engine) -> None:
    key = {"scope": "s", "key": "k"}
    assert await call(engine, "state::get", key) is None
    first = await call(engine, "state::set", {**key, "value": {"n": 1}})
    assert await call(engine, "state::get", key) == {
        "value": {"n": 1},
        "revision": first["revision"],
    }
    second = await call(
        engine, "state::set", {**key, "value": 2, "expected_revision": first["revision"]}
    )
    assert second["revision"] > first["revision"]
    created = await call(
        engine, "state::set", {"scope": "s", "key": "new", "value": 0, "expected_revision": 0}
    )
    assert created["revision"] > 0


async def test_a_revision_conflict_keeps_its_code(engine: Engine) -> None:
    key = {"scope": "s", "key": "k"}
    await call(engine, "state::set", {**key, "value": 1})
    with pytest.raises(InvocationError) as caught:
        await call(engine, "state::set", {**key, "value": 2, "expected_revision": 99})
    assert caught.value.remote_code == "revision_conflict"
    assert "expected revision 99" in caught.value.message
    with pytest.raises(InvocationError) as caught:
        await call(engine, "state::delete", {**key, "expected_revision": 99})
    assert caught.value.remote_code == "revision_conflict"


async def test_state_update_delete_and_list(engine: Engine) -> None:
    updated = await call(
        engine,
        "state::update",
        {
            "scope": "s",
            "key": "a",
            "ops": [
                {"op": "set", "value": {"tags": []}},
                {"op": "append", "path": ["tags"], "value": "x"},
                {"op": "increment", "path": ["count"], "value": 2},
            ],
        },
    )
    assert updated["value"] == {"tags": ["x"], "count": 2}
    await call(engine, "state::set", {"scope": "s", "key": "b", "value": 1})
    await call(engine, "state::set", {"scope": "other", "key": "a", "value": 1})
    listed = await call(engine, "state::list", {"scope": "s"})
    assert [item["key"] for item in listed["items"]] == ["a", "b"]
    assert listed["items"][0]["value"] == {"tags": ["x"], "count": 2}
    assert await call(engine, "state::list", {"scope": "s", "prefix": "b"}) == {
        "items": [{"key": "b", "value": 1, "revision": listed["items"][1]["revision"]}]
    }
    assert await call(engine, "state::delete", {"scope": "s", "key": "a"}) == {"deleted": True}
    assert await call(engine, "state::delete", {"scope": "s", "key": "a"}) == {"deleted": False}


async def test_an_update_that_does_not_fit_is_invalid_update(engine: Engine) -> None:
    await call(engine, "state::set", {"scope": "s", "key": "k", "value": "text"})
    with pytest.raises(InvocationError) as caught:
        await call(
            engine,
            "state::update",
            {"scope": "s", "key": "k", "ops": [{"op": "increment", "value": 1}]},
        )
    assert caught.value.remote_code == "invalid_update"


async def test_a_value_too_deep_to_read_back_is_refused_and_the_scope_still_lists(
    engine: Engine,
) -> None:
    deep: Any = 1
    for _ in range(300):
        deep = [deep]
    await call(engine, "state::set", {"scope": "s", "key": "ok", "value": 1})
    with pytest.raises(EngineError) as refused:
        await call(engine, "state::set", {"scope": "s", "key": "deep", "value": deep})
    assert refused.value.code == "invalid_payload"
    assert "nests deeper than" in refused.value.message
    listed = await call(engine, "state::list", {"scope": "s"})
    assert [item["key"] for item in listed["items"]] == ["ok"]
    # the deepest value a payload can carry reads back, inside the answer's own envelope
    deepest: Any = 1
    for _ in range(MAX_DEPTH - 1):
        deepest = [deepest]
    await call(engine, "state::set", {"scope": "s", "key": "deepest", "value": deepest})
    listed = await call(engine, "state::list", {"scope": "s"})
    assert [item["value"] for item in listed["items"]] == [deepest, 1]


async def test_a_stream_position_past_what_the_store_counts_is_an_invalid_request(
    engine: Engine,
) -> None:
    with pytest.raises(InvocationError) as caught:
        await call(engine, "stream::read", {"stream": "s", "group_id": "g", "after": 2**70})
    assert caught.value.remote_code == "invalid_request"


async def test_stream_append_and_read(engine: Engine) -> None:
    for n in range(3):
        seq = await call(engine, "stream::append", {"stream": "ev", "group_id": "g", "data": n})
        assert seq == {"seq": n + 1}
    page = await call(engine, "stream::read", {"stream": "ev", "group_id": "g", "after": 1})
    assert [(r["seq"], r["data"]) for r in page["records"]] == [(2, 1), (3, 2)]
    assert all(isinstance(r["timestamp"], float) for r in page["records"])
    limited = await call(engine, "stream::read", {"stream": "ev", "group_id": "g", "limit": 1})
    assert [r["seq"] for r in limited["records"]] == [1]


async def test_stream_snapshot_gives_what_is_offered_after_the_last_stored_record(
    engine: Engine,
) -> None:
    target = {"stream": "ev", "group_id": "g"}
    assert await call(engine, "stream::snapshot", target) == {"records": []}
    await call(engine, "stream::append", {**target, "data": "stored"})
    async with engine.offer_snapshot("ev", "g", lambda: {"so_far": "one two"}):
        taken = await call(engine, "stream::snapshot", target)
    assert [(r["seq"], r["data"]) for r in taken["records"]] == [(1, {"so_far": "one two"})]
    assert await call(engine, "stream::snapshot", target) == {"records": []}


async def test_stream_delete_group_removes_one_group_only(engine: Engine) -> None:
    for group in ("gone", "gone", "kept"):
        await call(engine, "stream::append", {"stream": "ev", "group_id": group, "data": 0})
    target = {"stream": "ev", "group_id": "gone"}
    assert await call(engine, "stream::delete_group", target) == {"deleted": 2}
    assert await call(engine, "stream::delete_group", target) == {"deleted": 0}
    assert (await call(engine, "stream::read", target))["records"] == []
    kept = await call(engine, "stream::read", {"stream": "ev", "group_id": "kept"})
    assert [r["seq"] for r in kept["records"]] == [1]


async def test_the_catalog_publishes_json_schemas(engine: Engine) -> None:
    catalog = await call(engine, "engine::functions::list")
    entries = {entry["function_id"]: entry for entry in catalog["functions"]}
    assert set(entries) == {
        "state::get",
        "state::set",
        "state::update",
        "state::delete",
        "state::list",
        "stream::append",
        "stream::read",
        "stream::snapshot",
        "stream::delete_group",
        "engine::functions::list",
        "engine::workers::list",
    }
    state_set = entries["state::set"]
    assert state_set["worker"] == "engine"
    assert state_set["description"]
    assert state_set["request_schema"] == StateSetRequest.model_json_schema()
    assert set(state_set["request_schema"]["required"]) == {"scope", "key", "value"}
    get_schema = entries["state::get"]["response_schema"]
    assert {"type": "null"} in get_schema["anyOf"]
    assert get_schema["$defs"]["StateValue"] == StateValue.model_json_schema()


async def test_workers_list(engine: Engine) -> None:
    workers = (await call(engine, "engine::workers::list", {}))["workers"]
    assert [worker["name"] for worker in workers] == ["engine"]
    assert "state::get" in workers[0]["functions"]
    assert isinstance(workers[0]["pid"], int)


@pytest.mark.parametrize(
    ("function_id", "payload", "reason"),
    [
        ("state::get", {"scope": "s"}, "key: Field required"),
        ("state::get", {"scope": "s", "key": 3}, "key: Input should be a valid string"),
        ("state::set", {"scope": "s", "key": "k", "value": 1, "extra": 1}, "extra: Extra inputs"),
        ("state::set", {"scope": "s", "key": "k", "value": 1, "expected_revision": -1}, "greater"),
        ("state::update", {"scope": "s", "key": "k", "ops": [{"op": "pop"}]}, "ops.0.op"),
        ("stream::read", {"stream": "s", "group_id": "g", "limit": 0}, "limit"),
        ("state::list", [], "Input should be a valid dictionary"),
        ("engine::functions::list", {"x": 1}, "x: Extra inputs are not permitted"),
    ],
)
async def test_bad_requests_are_invalid_request_with_pydantics_reason(
    engine: Engine, function_id: str, payload: Any, reason: str
) -> None:
    with pytest.raises(InvocationError) as caught:
        await call(engine, function_id, payload)
    assert caught.value.remote_code == "invalid_request"
    assert reason in caught.value.message
