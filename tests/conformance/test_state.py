"""State: revisions, compare-and-set, atomic updates, delete, list."""

from __future__ import annotations

import asyncio
from typing import Any

import pydantic
import pytest

from tackroom.engine import (
    Engine,
    InvalidPayload,
    InvalidUpdate,
    RevisionConflict,
    StateEntry,
    UpdateOp,
)


async def test_get_missing_key_returns_none(engine: Engine) -> None:
    assert await engine.get_state("users", "nobody") is None


async def test_set_then_get_and_revisions_grow(engine: Engine) -> None:
    first = await engine.set_state("users", "ada", {"name": "Ada"})
    assert first == StateEntry("users", "ada", {"name": "Ada"}, first.revision)
    assert first.revision >= 1
    assert await engine.get_state("users", "ada") == first

    second = await engine.set_state("users", "ada", {"name": "Ada L."})
    third = await engine.update_state("users", "ada", [{"op": "set", "path": ["x"], "value": 1}])

    assert first.revision < second.revision < third.revision
    assert await engine.get_state("users", "ada") == third


async def test_values_are_copied_both_ways(engine: Engine) -> None:
    value = {"tags": ["a"]}
    await engine.set_state("users", "ada", value)
    value["tags"].append("mutated by caller")

    entry = await engine.get_state("users", "ada")
    assert entry is not None
    assert entry.value == {"tags": ["a"]}
    entry.value["tags"].append("mutated by reader")

    again = await engine.get_state("users", "ada")
    assert again is not None
    assert again.value == {"tags": ["a"]}


class Profile(pydantic.BaseModel):
    name: str
    age: int


async def test_pydantic_model_value_is_stored_as_json(engine: Engine) -> None:
    entry = await engine.set_state("users", "ada", Profile(name="Ada", age=36))
    assert entry.value == {"name": "Ada", "age": 36}
    stored = await engine.get_state("users", "ada")
    assert stored is not None
    assert stored.value == {"name": "Ada", "age": 36}


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"k": [value]}
    return value


@pytest.mark.parametrize(
    "value",
    [object(), {"k": {1, 2}}, {3: "int key"}, nested(150), nested(50_000), {"k": "\ud800"}],
    ids=["object", "set", "int-key", "nested-300", "nested-100000", "lone-surrogate"],
)
async def test_non_json_value_raises_invalid_payload_and_writes_nothing(
    engine: Engine, value: Any
) -> None:
    with pytest.raises(InvalidPayload):
        await engine.set_state("users", "bad", value)
    assert await engine.get_state("users", "bad") is None


async def test_compare_and_set_with_stale_revision_conflicts_and_writes_nothing(
    engine: Engine,
) -> None:
    first = await engine.set_state("users", "ada", {"v": 1})
    second = await engine.set_state("users", "ada", {"v": 2})

    with pytest.raises(RevisionConflict) as caught:
        await engine.set_state("users", "ada", {"v": 3}, expected_revision=first.revision)

    assert caught.value.expected == first.revision
    assert caught.value.actual == second.revision
    assert (caught.value.scope, caught.value.key) == ("users", "ada")
    assert await engine.get_state("users", "ada") == second


async def test_compare_and_set_with_current_revision_writes(engine: Engine) -> None:
    first = await engine.set_state("users", "ada", {"v": 1})

    second = await engine.set_state("users", "ada", {"v": 2}, expected_revision=first.revision)

    assert second.revision > first.revision
    assert await engine.get_state("users", "ada") == second


async def test_expected_revision_zero_is_create_only(engine: Engine) -> None:
    created = await engine.set_state("users", "ada", {"v": 1}, expected_revision=0)
    assert created.value == {"v": 1}

    with pytest.raises(RevisionConflict) as caught:
        await engine.set_state("users", "ada", {"v": 2}, expected_revision=0)

    assert caught.value.expected == 0
    assert caught.value.actual == created.revision
    assert await engine.get_state("users", "ada") == created


async def test_expected_revision_on_absent_key_conflicts_with_actual_zero(engine: Engine) -> None:
    with pytest.raises(RevisionConflict) as caught:
        await engine.set_state("users", "ghost", {"v": 1}, expected_revision=3)

    assert (caught.value.expected, caught.value.actual) == (3, 0)
    assert await engine.get_state("users", "ghost") is None


async def test_update_ops_with_paths(engine: Engine) -> None:
    async def apply(*ops: UpdateOp) -> Any:
        return (await engine.update_state("doc", "d1", list(ops))).value

    assert await apply({"op": "set", "path": ["a", "b"], "value": 1}) == {"a": {"b": 1}}
    assert await apply({"op": "merge", "path": ["a"], "value": {"c": 2, "b": 5}}) == {
        "a": {"b": 5, "c": 2}
    }
    assert await apply({"op": "append", "path": ["log"], "value": "x"}) == {
        "a": {"b": 5, "c": 2},
        "log": ["x"],
    }
    assert await apply(
        {"op": "append", "path": ["log"], "value": "y"},
        {"op": "increment", "path": ["stats", "n"], "value": 2},
    ) == {"a": {"b": 5, "c": 2}, "log": ["x", "y"], "stats": {"n": 2}}
    assert await apply({"op": "increment", "path": ["stats", "n"], "value": 1.5}) == {
        "a": {"b": 5, "c": 2},
        "log": ["x", "y"],
        "stats": {"n": 3.5},
    }
    assert await apply({"op": "remove", "path": ["a", "b"]}) == {
        "a": {"c": 2},
        "log": ["x", "y"],
        "stats": {"n": 3.5},
    }
    assert await apply({"op": "merge", "path": [], "value": {"top": True}}) == {
        "a": {"c": 2},
        "log": ["x", "y"],
        "stats": {"n": 3.5},
        "top": True,
    }
    assert await apply({"op": "set", "path": [], "value": [1]}) == [1]
    stored = await engine.get_state("doc", "d1")
    assert stored is not None
    assert stored.value == [1]


async def test_update_on_absent_key_starts_from_none(engine: Engine) -> None:
    entry = await engine.update_state("doc", "new", [{"op": "set", "value": {"fresh": True}}])
    assert entry.value == {"fresh": True}
    assert entry.revision >= 1


BAD_OPS: dict[str, list[Any]] = {
    "append-to-string": [{"op": "append", "path": ["name"], "value": 1}],
    "increment-string": [{"op": "increment", "path": ["name"], "value": 1}],
    "increment-by-string": [{"op": "increment", "path": ["count"], "value": "x"}],
    "merge-into-list": [{"op": "merge", "path": ["items"], "value": {"a": 1}}],
    "merge-non-dict": [{"op": "merge", "path": [], "value": [1]}],
    "path-through-string": [{"op": "set", "path": ["name", "first"], "value": "A"}],
    "unknown-op": [{"op": "explode", "path": ["name"]}],
    "second-op-bad": [
        {"op": "set", "path": ["count"], "value": 100},
        {"op": "append", "path": ["name"], "value": 1},
    ],
}


@pytest.mark.parametrize("ops", list(BAD_OPS.values()), ids=list(BAD_OPS))
async def test_bad_update_raises_invalid_update_and_writes_nothing(
    engine: Engine, ops: list[Any]
) -> None:
    before = await engine.set_state("doc", "d1", {"name": "Ada", "count": 1, "items": [1]})

    with pytest.raises(InvalidUpdate):
        await engine.update_state("doc", "d1", ops)

    assert await engine.get_state("doc", "d1") == before


async def test_non_json_update_value_raises_and_writes_nothing(engine: Engine) -> None:
    before = await engine.set_state("doc", "d1", {"name": "Ada"})

    with pytest.raises((InvalidPayload, InvalidUpdate)):
        await engine.update_state("doc", "d1", [{"op": "set", "path": ["x"], "value": object()}])

    assert await engine.get_state("doc", "d1") == before


async def test_an_update_nesting_past_the_limit_raises_and_writes_nothing(
    engine: Engine,
) -> None:
    before = await engine.set_state("doc", "d1", {"name": "Ada"})
    deep_path = [f"p{i}" for i in range(100)]

    with pytest.raises(InvalidPayload, match="nests deeper"):
        await engine.update_state(
            "doc", "d1", [{"op": "set", "path": deep_path, "value": nested(20)}]
        )

    assert await engine.get_state("doc", "d1") == before


async def test_create_only_write_after_delete(engine: Engine) -> None:
    await engine.set_state("users", "ada", {"v": 1})
    await engine.delete_state("users", "ada")

    again = await engine.set_state("users", "ada", {"v": 2}, expected_revision=0)

    assert again.value == {"v": 2}
    with pytest.raises(RevisionConflict) as caught:
        await engine.delete_state("users", "ghost", expected_revision=1)
    assert caught.value.actual == 0


async def test_delete(engine: Engine) -> None:
    assert await engine.delete_state("users", "nobody") is False
    await engine.set_state("users", "ada", {"v": 1})

    assert await engine.delete_state("users", "ada") is True
    assert await engine.get_state("users", "ada") is None
    assert await engine.delete_state("users", "ada") is False


async def test_delete_with_compare_and_set(engine: Engine) -> None:
    first = await engine.set_state("users", "ada", {"v": 1})
    second = await engine.set_state("users", "ada", {"v": 2})

    with pytest.raises(RevisionConflict) as caught:
        await engine.delete_state("users", "ada", expected_revision=first.revision)
    assert (caught.value.expected, caught.value.actual) == (first.revision, second.revision)
    assert await engine.get_state("users", "ada") == second

    assert await engine.delete_state("users", "ada", expected_revision=second.revision) is True
    assert await engine.get_state("users", "ada") is None


async def test_list_state_sorted_with_prefix(engine: Engine) -> None:
    for key in ["b", "a", "c", "ab", "x/1"]:
        await engine.set_state("items", key, {"k": key})
    await engine.set_state("items2", "a0", {"k": "other scope"})
    await engine.set_state("other", "a1", {"k": "other scope"})

    entries = await engine.list_state("items")
    assert [e.key for e in entries] == ["a", "ab", "b", "c", "x/1"]
    assert all(e.scope == "items" and e.value == {"k": e.key} for e in entries)
    assert all(e.revision >= 1 for e in entries)

    assert [e.key for e in await engine.list_state("items", prefix="a")] == ["a", "ab"]
    assert [e.key for e in await engine.list_state("items", prefix="x/")] == ["x/1"]
    assert await engine.list_state("items", prefix="zzz") == []
    assert await engine.list_state("empty") == []


async def test_concurrent_compare_and_set_incrementers_lose_no_update(engine: Engine) -> None:
    conflicts = 0

    async def increment() -> None:
        nonlocal conflicts
        while True:
            entry = await engine.get_state("counters", "c")
            current = entry.value if entry else 0
            await asyncio.sleep(0)  # let the others read the same revision
            try:
                await engine.set_state(
                    "counters", "c", current + 1, expected_revision=entry.revision if entry else 0
                )
                return
            except RevisionConflict:
                conflicts += 1

    await asyncio.gather(*(increment() for _ in range(20)))

    final = await engine.get_state("counters", "c")
    assert final is not None
    assert final.value == 20
    assert conflicts > 0, "the incrementers never raced; the test proved nothing"


async def test_concurrent_atomic_increments_lose_no_update(engine: Engine) -> None:
    await asyncio.gather(
        *(
            engine.update_state("counters", "n", [{"op": "increment", "path": ["n"], "value": 1}])
            for _ in range(20)
        )
    )

    final = await engine.get_state("counters", "n")
    assert final is not None
    assert final.value == {"n": 20}
