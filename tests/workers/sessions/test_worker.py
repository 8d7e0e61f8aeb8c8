"""The worker on the bus: its catalog, its config, and what an append costs in stored bytes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from tackroom.contracts import sessions as contracts
from tackroom.engine import Engine, open_engine
from tackroom.engine.jsonvalue import dumps
from tackroom.runtime import Host, load_worker
from tackroom.runtime.config import HarnessConfig
from tackroom.workers.sessions.records import ENTRIES_SCOPE, SESSIONS_SCOPE
from tackroom.workers.sessions.worker import WORKER, SessionsConfig

SCOPES = [
    SESSIONS_SCOPE,
    ENTRIES_SCOPE,
    "sessions-by-created",
    "sessions-by-created-days",
    "inbox",
]

FUNCTION_IDS = [
    contracts.CREATE.id,
    contracts.ENSURE.id,
    contracts.GET.id,
    contracts.APPEND.id,
    contracts.APPEND_BATCH.id,
    contracts.MESSAGES.id,
    contracts.FORK.id,
    contracts.CLONE.id,
    contracts.TREE.id,
    contracts.LIST.id,
    contracts.INBOX_PUSH.id,
    contracts.INBOX_PEEK.id,
    contracts.INBOX_DRAIN.id,
    contracts.INBOX_REMOVE.id,
    contracts.DELETE.id,
    contracts.PIN.id,
    contracts.UNPIN.id,
    contracts.SET_TITLE.id,
]


@pytest.fixture
async def bus() -> AsyncIterator[Engine]:
    async with Host(engine=open_engine("embedded::memory:"), workers=[WORKER]) as host:
        yield host.engine


async def stored_bytes(engine: Engine) -> int:
    total = 0
    for scope in SCOPES:
        for item in await engine.list_state(scope):
            total += len(item.key) + len(dumps(item.value).encode())
    return total


def test_the_registry_boots_this_worker() -> None:
    assert load_worker("sessions") is WORKER


async def test_every_function_is_in_the_catalog_with_schemas(bus: Engine) -> None:
    infos = {i.function_id: i for i in await bus.list_functions() if i.worker == "sessions"}
    assert sorted(infos) == sorted(FUNCTION_IDS)
    for info in infos.values():
        assert info.description
        assert info.request_schema is not None
        assert info.response_schema is not None
    append_schema = infos[contracts.APPEND.id].request_schema
    assert append_schema is not None
    assert append_schema["required"] == ["session_id", "message"]


async def test_config_is_validated() -> None:
    config = HarnessConfig.defaults()
    assert config.worker_settings(WORKER) == SessionsConfig()
    with pytest.raises(ValueError, match="max_attempts"):
        SessionsConfig(max_attempts=0)


async def test_each_entry_is_a_value_of_its_own(bus: Engine) -> None:
    info = await bus.trigger(contracts.CREATE.id, {"session_id": "s1"})
    assert info["session_id"] == "s1"
    message = {"role": "user", "content": [{"type": "text", "text": "hi"}]}
    for entry_id in ("a", "b"):
        await bus.trigger(
            contracts.APPEND.id, {"session_id": "s1", "entry_id": entry_id, "message": message}
        )
    keys = [item.key for item in await bus.list_state(ENTRIES_SCOPE)]
    assert keys == ["s1/a", "s1/b"]
    meta = await bus.get_state(SESSIONS_SCOPE, "s1")
    assert meta is not None
    assert meta.value["schema_version"] == 1
    # The metadata and the entries commit together here: no message waits in ``pending`` (on
    # an engine without transactions it keeps the newest batch: tests/workers/sessions/
    # test_store.py), so each message is stored once.
    assert meta.value["pending"] == []
    assert meta.value["preview"] == "hi"
    info = await bus.trigger(contracts.GET.id, {"session_id": "s1"})
    assert info["last_message_preview"] == "hi"


async def test_stored_bytes_per_append_are_flat_from_turn_1_to_turn_200(bus: Engine) -> None:
    await bus.trigger(contracts.CREATE.id, {"session_id": "long"})
    added: dict[int, int] = {}

    def payload(i: int) -> dict[str, Any]:
        text = "a user message of the same length every time"
        message = {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": 1.0}
        return {"session_id": "long", "entry_id": f"e{i:04d}", "message": message}

    measured = (1, 2, 200)
    for i in range(1, 201):
        before = await stored_bytes(bus) if i in measured else 0
        await bus.trigger(contracts.APPEND.id, payload(i))
        if i in measured:
            added[i] = await stored_bytes(bus) - before
    # The first append also gives the metadata its copy of the newest entry; from then on that
    # copy is replaced, so each append adds one entry's bytes, whatever the session's length.
    assert abs(added[200] - added[2]) <= 8, added
    assert added[200] <= 1.2 * added[1], added
    assert await stored_bytes(bus) <= 200 * added[200] * 1.2
