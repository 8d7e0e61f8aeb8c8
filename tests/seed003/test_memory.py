"""Seed 003's ``use_memory(MemoryAdapter)``: long-term memory with ``save`` and ``load``."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

from tackroom import Harness, Memory, MemoryAdapter, UsageError
from tackroom.contracts.memory import MemoryScope
from tackroom.contracts.messages import AgentMessage, text_of
from tackroom.engine.errors import InvocationError
from tackroom.harness import memory_adapter
from tackroom.testing import FunctionModel, ModelInfo, ToolCall


class AsyncNotes:
    """An async adapter whose ``load`` ranks with scores, as a vector store would."""

    def __init__(self) -> None:
        self.saved: list[tuple[str, dict[str, Any]]] = []

    async def save(self, text: str, metadata: dict[str, Any]) -> str:
        self.saved.append((text, metadata))
        return f"note-{len(self.saved)}"

    async def load(self, query: str, limit: int) -> list[Memory]:
        words = set(query.lower().strip("?.").split())
        found = [
            Memory(text, id=f"note-{i + 1}", metadata=meta, score=0.9 - i / 10)
            for i, (text, meta) in enumerate(self.saved)
            if words & set(text.lower().strip(".").split())
        ]
        return found[:limit]


def remember_then_answer(seen: list[str]) -> FunctionModel:
    """Saves what the user says in the first session; answers from the recall afterwards."""

    def answer(messages: list[AgentMessage], info: ModelInfo) -> str | ToolCall:
        texts = [text_of(m.content) for m in messages if m.role == "user"]
        recalled = [text for text in texts if text.startswith("From long-term memory")]
        seen.extend(recalled)
        prompt = text_of(messages[0].content)
        if prompt.startswith("Remember") and not any(m.role == "function_result" for m in messages):
            return ToolCall("memory__save", {"text": prompt.removeprefix("Remember: ")})
        return "noted" if prompt.startswith("Remember") else f"recalled {len(recalled)}"

    return FunctionModel(answer)


async def test_an_adapter_saves_through_the_tool_and_loads_into_the_context(
    tmp_path: Path,
) -> None:
    notes = AsyncNotes()
    assert isinstance(notes, MemoryAdapter)
    seen: list[str] = []
    harness = Harness(remember_then_answer(seen), home=tmp_path, auto_approve=True)
    harness.use_memory(notes)
    async with harness:
        first = await harness.run("Remember: staging listens on port 6543.")
        second = await harness.run("Which port does staging use?")
        loaded = await harness.memory.load("staging port")
    assert first.output == "noted", first.error
    assert notes.saved == [("staging listens on port 6543.", {})]
    assert second.output == "recalled 1"
    assert "staging listens on port 6543." in seen[-1]
    assert [(m.text, m.id) for m in loaded] == [("staging listens on port 6543.", "note-1")]
    assert 0 < (loaded[0].score or 0) < 1


async def test_by_default_the_memory_worker_keeps_it(tmp_path: Path) -> None:
    seen: list[str] = []
    harness = Harness(remember_then_answer(seen), home=tmp_path, auto_approve=True)
    harness.use_memory()
    async with harness:
        await harness.run("Remember: the deploy key rotates on Mondays.")
        second = await harness.run("When does the deploy key rotate?")
        ids = [await harness.memory.save("a note from the program")]
    assert second.output == "recalled 1", second.error
    assert "the deploy key rotates on Mondays." in seen[-1]
    assert (tmp_path / "memory.db").exists()
    assert ids[0].startswith("mem_")


async def test_an_adapter_is_one_memory_and_says_so(tmp_path: Path) -> None:
    class Plain:
        def save(self, text: str) -> None:  # takes only the text: allowed
            self.text = text

        def load(self, query: str) -> list[Any]:
            return [{"text": "b", "score": 0.2}, {"text": "a", "score": 0.7}, "c"]

    harness = Harness(FunctionModel(lambda m, i: "x"), home=tmp_path)
    plain = Plain()
    harness.use_memory(plain, recall=False, tools=False)  # type: ignore[arg-type]
    async with harness:
        await harness.memory.save("kept")
        hits = await harness.memory.load("anything", limit=2)
        named = memory_adapter.BusMemory(harness.bus, scope=MemoryScope(kind="user", id="bob"))
        with pytest.raises(InvocationError, match="no ids or scopes: leave out the scope user:bob"):
            await named.load("x")
    assert plain.text == "kept"
    assert [hit.text for hit in hits] == ["b", "a"]
    assert [hit.score for hit in hits] == [0.2, 0.2]  # never above the hit before


def test_a_session_store_by_name_still_works_and_warns_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(memory_adapter, "_warned", False)
    harness = Harness(FunctionModel(lambda m, i: "x"), home=tmp_path)
    with pytest.warns(DeprecationWarning, match="use_session_store"):
        harness.use_memory("my-sessions")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        harness.use_memory("my-sessions")  # a second call: no second warning
        harness.use_session_store("other-sessions")
    assert harness._brings.sessions_worker == "other-sessions"


def test_use_memory_refuses_what_is_not_an_adapter(tmp_path: Path) -> None:
    harness = Harness(FunctionModel(lambda m, i: "x"), home=tmp_path)
    with pytest.raises(UsageError, match="an object with save and load") as caught:
        harness.use_memory(42)  # type: ignore[arg-type]
    assert "\n" not in str(caught.value)
