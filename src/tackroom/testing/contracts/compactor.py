"""The contract of a compaction worker (``compaction::compact``), by function id.

A replacement compactor proves it fits by subclassing :class:`CompactorContract` and naming
itself. The suite hosts it beside the shipped ``sessions`` worker and a model (provider
``function``) that answers every summary request with :data:`SUMMARY`; each test fills a
session through ``session-tree::*`` and reads it back the same way.

What a compactor must do: append one compaction entry (a ``custom`` message of ``custom_type``
``"compaction"``, stored with entry type ``compaction``) whose details name the entries it
replaces and the first entry kept whole; never replace a pinned entry; never start the kept part
on a function result; keep at least ``keep_last`` entries (exactly those when a person asks:
``reason: "manual"``); store one entry however often it is asked at the same leaf; change no
stored entry.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from tackroom.contracts.messages import (
    AgentMessage,
    AssistantMessage,
    FunctionCallBlock,
    FunctionResultMessage,
    TextBlock,
    UserMessage,
)
from tackroom.engine.factory import open_engine
from tackroom.engine.protocol import Engine
from tackroom.harness.models import model_worker
from tackroom.runtime.config import HarnessConfig
from tackroom.runtime.host import Host
from tackroom.runtime.registry import load_worker
from tackroom.testing.contracts.base import WorkerContract
from tackroom.testing.function_model import FunctionModel, ModelInfo

__all__ = ["SUMMARY", "CompactorContract"]

SUMMARY = "The user and the assistant discussed the items; nothing is left open."
SESSION = "compact-me"


def _summarise(messages: list[AgentMessage], info: ModelInfo) -> str:
    return SUMMARY


def conversation(pairs: int, *, with_tools: bool = False) -> list[tuple[str, AgentMessage]]:
    """``pairs`` question/answer pairs of about 500 characters; with tools, every answer calls
    a tool and its result follows."""
    entries: list[tuple[str, AgentMessage]] = []
    for i in range(pairs):
        entries.append((f"u{i}", UserMessage.text(f"Question {i}: " + "tell me more " * 20)))
        if with_tools:
            call = FunctionCallBlock(id=f"c{i}", tool_name="lookup", arguments={"i": i})
            entries.append((f"a{i}", AssistantMessage(content=[call], stop_reason="function_call")))
            result = FunctionResultMessage(
                function_call_id=f"c{i}",
                function_id="lookup",
                content=[TextBlock(text="found " * 40)],
            )
            entries.append((f"r{i}", result))
        entries.append((f"z{i}", AssistantMessage(content=[TextBlock(text="An answer. " * 25)])))
    return entries


class CompactorContract(WorkerContract):
    worker_name = "compactor"

    @asynccontextmanager
    async def hosted(
        self, engine_url: str, config: dict[str, Any] | None = None, **_: Any
    ) -> AsyncIterator[Engine]:
        spec = self.worker_spec()
        harness = HarnessConfig.defaults()
        if config is not None:
            harness = harness.model_copy(update={"worker_config": {spec.name: config}})
        model = model_worker(FunctionModel(_summarise), model_name="function")
        workers = [load_worker("engine"), load_worker("sessions"), model, spec]
        async with Host(engine=open_engine(engine_url), workers=workers, config=harness) as host:
            yield host.engine

    # -- helpers -------------------------------------------------------------------------------
    async def fill(self, bus: Engine, entries: list[tuple[str, AgentMessage]]) -> None:
        await self.call(bus, "session-tree::ensure", {"session_id": SESSION})
        items = [
            {"entry_id": entry_id, "message": message.model_dump(mode="json")}
            for entry_id, message in entries
        ]
        for start in range(0, len(items), 200):
            await self.call(
                bus,
                "session-tree::append_batch",
                {"session_id": SESSION, "entries": items[start : start + 200]},
            )

    async def compact(self, bus: Engine, **fields: Any) -> dict[str, Any]:
        request = {
            "session_id": SESSION,
            "provider": "function",
            "model": "function",
            "target_tokens": 1_000,
            "keep_last": 4,
            "chars_per_token": 4.0,
            **fields,
        }
        reply: dict[str, Any] = await self.call(bus, "compaction::compact", request)
        assert reply["schema_version"] == 1
        return reply

    async def path(self, bus: Engine) -> list[dict[str, Any]]:
        reply = await self.call(bus, "session-tree::messages", {"session_id": SESSION})
        messages: list[dict[str, Any]] = reply["messages"]
        return messages

    @staticmethod
    def compactions(path: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [entry for entry in path if entry["type"] == "compaction"]

    # -- tests ---------------------------------------------------------------------------------
    async def test_one_entry_names_what_it_replaces(self, bus: Engine) -> None:
        history = conversation(20)
        await self.fill(bus, history)
        reply = await self.compact(bus)
        assert reply["compacted"] is True
        assert reply["replaced"] > 0
        path = await self.path(bus)
        [entry] = self.compactions(path)
        assert entry["entry_id"] == reply["entry_id"] == path[-1]["entry_id"]
        message = entry["message"]
        assert message["role"] == "custom"
        assert message["custom_type"] == "compaction"
        assert message["content"] == [{"type": "text", "text": SUMMARY}]
        details = message["details"]
        ids = [entry_id for entry_id, _ in history]
        replaced = details["replaces"]
        assert replaced == ids[: len(replaced)], "the oldest entries, in order"
        assert details["first_kept_entry_id"] == ids[len(replaced)]
        assert len(ids) - len(replaced) >= 4  # keep_last
        assert details["tokens_after"] < details["tokens_before"]
        assert details["provider"] == "function"
        assert details["model"] == "function"
        assert [e["entry_id"] for e in path[:-1]] == ids, "no stored entry changed"

    async def test_asking_again_at_the_same_leaf_stores_nothing_new(self, bus: Engine) -> None:
        await self.fill(bus, conversation(20))
        first = await self.compact(bus)
        again = await self.compact(bus)
        assert again["compacted"] is False
        assert again["entry_id"] == first["entry_id"]
        assert len(self.compactions(await self.path(bus))) == 1

    async def test_pinned_entries_are_never_replaced(self, bus: Engine) -> None:
        await self.fill(bus, conversation(20))
        await self.call(bus, "session-tree::pin", {"session_id": SESSION, "entry_id": "u0"})
        await self.call(bus, "session-tree::pin", {"session_id": SESSION, "entry_id": "z3"})
        await self.compact(bus)
        [entry] = self.compactions(await self.path(bus))
        replaced = entry["message"]["details"]["replaces"]
        assert "u0" not in replaced
        assert "z3" not in replaced
        assert "u1" in replaced

    async def test_the_kept_part_never_starts_on_a_result(self, bus: Engine) -> None:
        await self.fill(bus, conversation(20, with_tools=True))
        for target in (300, 500, 800, 1_300):
            await self.call(bus, "session-tree::delete", {"session_id": SESSION})
            await self.fill(bus, conversation(20, with_tools=True))
            await self.compact(bus, target_tokens=target)
            path = await self.path(bus)
            [entry] = self.compactions(path)
            kept = entry["message"]["details"]["first_kept_entry_id"]
            assert not kept.startswith("r"), f"target {target}: kept part starts on {kept}"

    async def test_a_second_compaction_folds_the_first_in(self, bus: Engine) -> None:
        await self.fill(bus, conversation(20))
        first = await self.compact(bus)
        await self.fill(bus, conversation(40)[40:])  # twenty more pairs
        second = await self.compact(bus)
        assert second["compacted"] is True
        assert second["entry_id"] != first["entry_id"]
        path = await self.path(bus)
        older, newer = self.compactions(path)
        details = newer["message"]["details"]
        assert details["previous_compaction_id"] == older["entry_id"]
        kept = [e["entry_id"] for e in path].index(details["first_kept_entry_id"])
        assert kept > [e["entry_id"] for e in path].index(older["entry_id"])

    async def test_a_manual_compaction_keeps_only_the_newest(self, bus: Engine) -> None:
        history = conversation(6)
        await self.fill(bus, history)
        reply = await self.compact(bus, reason="manual", target_tokens=100_000, keep_last=2)
        assert reply["compacted"] is True
        [entry] = self.compactions(await self.path(bus))
        details = entry["message"]["details"]
        assert details["reason"] == "manual"
        assert details["first_kept_entry_id"] == history[-2][0]
        assert details["replaces"] == [entry_id for entry_id, _ in history[:-2]]

    async def test_nothing_to_summarise_is_an_answer_not_an_error(self, bus: Engine) -> None:
        await self.fill(bus, conversation(2))
        reply = await self.compact(bus, keep_last=4)
        assert reply["compacted"] is False
        assert reply["detail"]
        assert self.compactions(await self.path(bus)) == []

    async def test_an_empty_or_missing_session(self, bus: Engine) -> None:
        await self.call(bus, "session-tree::ensure", {"session_id": SESSION})
        assert (await self.compact(bus))["compacted"] is False
        code = await self.code_of(
            bus,
            "compaction::compact",
            {
                "session_id": "no-such-session",
                "provider": "function",
                "model": "function",
                "target_tokens": 100,
            },
        )
        assert code == "session_not_found"
