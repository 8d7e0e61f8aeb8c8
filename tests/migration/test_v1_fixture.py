"""Data written before schema version 2 still loads: the fixture in ``tests/fixtures/v1``.

The fixture was written by commit 2cc6d1c (see its README): function call blocks carry the tool
name as ``function_id``, turn records and tool call contexts carry the run id as ``message_id``.
Readers upgrade it as they read; writers write version 2.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from tackroom import Harness
from tackroom.contracts.events import EVENTS, MessageComplete
from tackroom.contracts.messages import (
    SCHEMA_VERSION,
    AssistantMessage,
    FunctionCallBlock,
    message_adapter,
)
from tackroom.contracts.sessions import MESSAGES, MessagesRequest, SessionEntry
from tackroom.contracts.tools import CallContext
from tackroom.contracts.turn import RunStartRequest
from tackroom.harness.result import PendingApproval
from tackroom.testing import ScriptedProvider
from tackroom.workers.orchestrator.record import TURNS_SCOPE, TurnRecord

FIXTURE = Path(__file__).parent.parent / "fixtures" / "v1"
DONE_RUN = "run-6ec152a7e29c"
PARKED_RUN = "run-c2845923ecf7"


def _records() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURE / "records.json").read_text())
    return data


def _calls(message: Any) -> list[FunctionCallBlock]:
    assert isinstance(message, AssistantMessage)
    return message.function_calls()


def _calls_of(message: Any) -> list[FunctionCallBlock]:
    return message.function_calls() if isinstance(message, AssistantMessage) else []


def _no_function_id_in_blocks(value: Any) -> bool:
    """No ``function_call`` block anywhere in ``value`` (a dump) holds ``function_id``."""
    if isinstance(value, dict):
        if value.get("type") == "function_call" and "function_id" in value:
            return False
        return all(_no_function_id_in_blocks(item) for item in value.values())
    if isinstance(value, list):
        return all(_no_function_id_in_blocks(item) for item in value)
    return True


# -- the models, on the fixture's records ------------------------------------------------------


def test_the_fixture_is_version_1() -> None:
    state = _records()["state"]
    assert state["turns"]["v1-done"]["message_id"] == DONE_RUN
    call = state["session-entries"][f"v1-done/{DONE_RUN}-t1-a"]["message"]
    assert call["schema_version"] == 1
    assert call["content"][0]["function_id"] == "add"


def test_v1_session_entries_load_with_tool_name() -> None:
    entries = {
        key: SessionEntry.model_validate(value)
        for key, value in _records()["state"]["session-entries"].items()
    }
    assert all(entry.message.schema_version == SCHEMA_VERSION == 2 for entry in entries.values())
    [add] = _calls(entries[f"v1-done/{DONE_RUN}-t1-a"].message)
    assert (add.id, add.tool_name, add.arguments) == ("call-add-1", "add", {"a": 2, "b": 3})
    [record] = _calls(entries[f"v1-parked/{PARKED_RUN}-t1-a"].message)
    assert (record.tool_name, record.arguments) == ("record", {"note": "buy milk"})
    # Written back, an upgraded entry is version 2 and reads the same.
    for entry in entries.values():
        dumped = entry.model_dump(mode="json")
        assert _no_function_id_in_blocks(dumped)
        assert dumped["message"]["schema_version"] == 2
        assert SessionEntry.model_validate(dumped) == entry


def test_v1_turn_records_load_without_message_id() -> None:
    turns = _records()["state"]["turns"]
    done = TurnRecord.model_validate(turns["v1-done"])
    assert (done.schema_version, done.run_id, done.state) == (5, DONE_RUN, "stopped")
    assert "message_id" not in done.model_dump()
    parked = TurnRecord.model_validate(turns["v1-parked"])
    assert (parked.run_id, parked.state) == (PARKED_RUN, "function_awaiting_approval")
    assert parked.last_assistant is not None
    assert [c.tool_name for c in parked.last_assistant.function_calls()] == ["record"]
    assert [(c.id, c.tool_name, c.status) for c in parked.calls] == [
        ("call-record-1", "record", "parked")
    ]
    assert _no_function_id_in_blocks(parked.model_dump(mode="json"))
    assert TurnRecord.model_validate(parked.model_dump(mode="json")) == parked


def test_v1_events_parse_with_tool_name() -> None:
    events = [EVENTS.parse(data) for data in _records()["streams"]["agent::events/v1-done"]]
    completed = [event for event in events if isinstance(event, MessageComplete)]
    assert [c.tool_name for c in _calls(completed[0].data.message)] == ["add"]


def test_v1_run_start_request_and_call_context_map_message_id_to_run_id() -> None:
    request = RunStartRequest.model_validate(
        {
            "schema_version": 1,
            "session_id": "s",
            "message_id": "run-1",
            "provider": "p",
            "model": "m",
        }
    )
    assert (request.schema_version, request.run_id) == (2, "run-1")
    assert "message_id" not in request.model_dump()
    # What the fixture's ``add`` tool received as ``_call``.
    context = CallContext.model_validate(
        {
            "schema_version": 1,
            "session_id": "v1-done",
            "function_call_id": "call-add-1",
            "message_id": DONE_RUN,
        }
    )
    assert (context.schema_version, context.run_id) == (2, DONE_RUN)


def test_version_2_is_read_as_written_and_old_keys_are_not_accepted_in_it() -> None:
    v2 = {
        "schema_version": 2,
        "role": "assistant",
        "content": [{"type": "function_call", "id": "c1", "tool_name": "fs__read"}],
    }
    assert [c.tool_name for c in _calls(message_adapter.validate_python(v2))] == ["fs__read"]
    stale = {**v2, "content": [{"type": "function_call", "id": "c1", "function_id": "fs__read"}]}
    with pytest.raises(ValidationError):
        message_adapter.validate_python(stale)
    with pytest.raises(ValidationError):
        RunStartRequest.model_validate(
            {
                "schema_version": 2,
                "session_id": "s",
                "message_id": "r",
                "provider": "p",
                "model": "m",
            }
        )
    # No schema_version at all is version 1 (the first version never needed to say).
    unversioned = {**stale}
    del unversioned["schema_version"]
    message = message_adapter.validate_python(unversioned)
    assert (message.schema_version, _calls(message)[0].tool_name) == (2, "fs__read")


def test_writers_write_version_2() -> None:
    message = AssistantMessage(content=[FunctionCallBlock(id="c1", tool_name="fs__read")])
    dumped = message.model_dump(mode="json")
    assert dumped["schema_version"] == 2
    assert dumped["content"][0]["tool_name"] == "fs__read"
    request = RunStartRequest(session_id="s", run_id="r", provider="p", model="m")
    assert request.model_dump()["schema_version"] == 2
    assert CallContext(session_id="s", function_call_id="c").model_dump()["schema_version"] == 2


# -- the engine file, opened by today's harness ------------------------------------------------


def _harness(home: Path, provider: ScriptedProvider) -> Harness:
    harness = Harness(provider, home=home)

    @harness.tool
    def add(a: int, b: int, call: CallContext) -> str:
        "Add two integers."
        return f"{a + b} (run {call.run_id})"

    @harness.tool(requires_approval=True)
    def record(note: str) -> str:
        "Record a note (needs a human's approval)."
        return f"recorded {note}"

    return harness


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    shutil.copyfile(FIXTURE / "engine.db", home / "engine.db")
    return home


async def test_a_v1_engine_file_loads_and_runs_on(home: Path) -> None:
    provider = ScriptedProvider(
        [
            {
                "session": "v1-done",
                "expect": {"has_function_result_for": "call-add-1", "last_user_contains": "4 + 5"},
                "tool_calls": [{"name": "add", "arguments": {"a": 4, "b": 5}, "id": "call-add-2"}],
            },
            {"session": "v1-done", "text": "4 + 5 = 9."},
            {"session": "v1-parked", "text": "Recorded."},
        ]
    )
    async with _harness(home, provider) as harness:
        # The transcript written by v1 loads, its call blocks with tool_name.
        reply = await MESSAGES.call(harness.engine, MessagesRequest(session_id="v1-done"))
        assert [m.message.role for m in reply.messages] == [
            "user",
            "assistant",
            "function_result",
            "assistant",
        ]
        assert [c.tool_name for c in _calls(reply.messages[1].message)] == ["add"]

        # The turn record written by v1 loads.
        stored = await harness.engine.get_state(TURNS_SCOPE, "v1-done")
        assert stored is not None
        assert stored.value["schema_version"] == 1
        assert TurnRecord.model_validate(stored.value).run_id == DONE_RUN
        state = await harness.get_state("v1-done")
        assert state is not None
        assert (state.run_id, state.state) == (DONE_RUN, "stopped")

        # A new run on the same session works, on top of the v1 history.
        result = await harness.run("And 4 + 5?", session="v1-done")
        assert (result.stop_reason, result.output) == ("end", "4 + 5 = 9.")
        assert result.run_id != DONE_RUN
        first = next(r for r in provider.requests if r.session_id == "v1-done")
        history_calls = [c for m in first.messages for c in _calls_of(m)]
        assert [c.tool_name for c in history_calls] == ["add"]

        # What it wrote is the current version: the record (5), the new entries, the tool's
        # call context (2).
        stored = await harness.engine.get_state(TURNS_SCOPE, "v1-done")
        assert stored is not None
        assert stored.value["schema_version"] == 5
        assert "message_id" not in stored.value
        assert stored.value["run_id"] == result.run_id
        reply = await MESSAGES.call(harness.engine, MessagesRequest(session_id="v1-done"))
        assert len(reply.messages) == 8
        [call] = _calls(reply.messages[5].message)
        assert call.tool_name == "add"
        assert reply.messages[6].message.role == "function_result"
        assert f"9 (run {result.run_id})" in json.dumps(reply.messages[6].message.model_dump())
        raw = await harness.engine.get_state(
            "session-entries", f"v1-done/{reply.messages[5].entry_id}"
        )
        assert raw is not None
        assert raw.value["message"]["schema_version"] == 2
        assert raw.value["message"]["content"][0]["tool_name"] == "add"


async def test_a_run_parked_by_v1_resumes(home: Path) -> None:
    provider = ScriptedProvider([{"session": "v1-parked", "text": "Recorded."}])
    async with _harness(home, provider) as harness:
        state = await harness.get_state("v1-parked")
        assert state is not None
        assert (state.run_id, state.state) == (PARKED_RUN, "function_awaiting_approval")
        [parked] = state.awaiting_approval
        assert (parked.function_call_id, parked.function_id) == ("call-record-1", "tool::record")
        await harness.approvals.approve(
            PendingApproval(
                session_id="v1-parked",
                run_id=state.run_id,
                function_call_id=parked.function_call_id,
                function_id=parked.function_id,
                arguments=parked.arguments,
            )
        )
        stream = await harness.follow("v1-parked")
        async for _ in stream:
            pass
        result = stream.result
        assert (result.run_id, result.stop_reason, result.output) == (
            PARKED_RUN,
            "end",
            "Recorded.",
        )
    provider.assert_consumed()
