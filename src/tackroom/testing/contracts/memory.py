"""The contract of a long-term memory worker (``memory::*``), by function id.

Any worker that replaces ``memory`` proves it fits by running this suite: subclass
:class:`MemoryContract` in a ``test_*.py`` module, name the worker, and give it storage of its
own for each test (:meth:`MemoryContract.storage` yields the worker's config section and removes
what it made afterwards)::

    class TestMyMemory(MemoryContract):
        worker_name = "my-memory"

        @contextmanager
        def storage(self, directory: Path) -> Iterator[dict[str, Any]]:
            yield {"url": ...}

Every check goes through ``engine.trigger`` only: no test reads the worker's storage.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

import pytest

from tackroom.engine import Engine
from tackroom.testing.contracts.base import WorkerContract

__all__ = ["MemoryContract"]

ALICE = {"kind": "user", "id": "alice"}
BOB = {"kind": "user", "id": "bob"}
FTS_LOOKING_QUERIES = (
    '"',
    '"unclosed',
    "AND",
    "OR NOT",
    "*",
    "( )",
    ":",
    "vault OR (",
    'text:"x" AND (y OR',
    "NEAR(a b, 2)",
    "'; drop table items; --",
    "-vault ^key +x",
    "a & b | !c <-> d",
)


class MemoryContract(WorkerContract):
    worker_name: ClassVar[str] = "memory"

    @contextmanager
    def storage(self, directory: Path) -> Iterator[dict[str, Any]]:
        """The worker's config section for one test, storing under ``directory``; a backend
        that stores elsewhere overrides this and cleans up after the ``yield``."""
        yield {"path": str(directory / "memory.db")}

    @pytest.fixture
    async def config(self, tmp_path: Path) -> AsyncIterator[dict[str, Any]]:
        with self.storage(tmp_path) as section:
            yield section

    @pytest.fixture
    async def bus(self, engine_url: str, config: dict[str, Any]) -> AsyncIterator[Engine]:
        async with self.hosted(engine_url, config) as engine:
            yield engine

    # -- helpers -------------------------------------------------------------------------------
    async def save(self, bus: Engine, text: str, **fields: Any) -> dict[str, Any]:
        reply: dict[str, Any] = await self.call(bus, "memory::save", {"text": text, **fields})
        assert reply["schema_version"] == 1
        return reply

    async def search(self, bus: Engine, query: str, **fields: Any) -> list[dict[str, Any]]:
        reply = await self.call(bus, "memory::search", {"query": query, **fields})
        hits: list[dict[str, Any]] = reply["hits"]
        return hits

    @staticmethod
    def texts(hits: list[dict[str, Any]]) -> list[str]:
        return [hit["item"]["text"] for hit in hits]

    # -- items ---------------------------------------------------------------------------------
    async def test_save_get_replace_and_delete(self, bus: Engine) -> None:
        saved = await self.save(bus, "The staging database is on port 5433.", metadata={"k": 1})
        assert saved["created"] is True
        item = saved["item"]
        assert item["scope"] == {"kind": "workspace", "id": "default"}  # the default scope
        assert item["metadata"] == {"k": 1}
        assert item["created_at"] == item["updated_at"] > 0
        assert await self.call(bus, "memory::get", {"id": item["id"]}) == item

        again = await self.save(bus, "The staging database moved to port 6543.", id=item["id"])
        assert again["created"] is False
        replaced = again["item"]
        assert replaced["id"] == item["id"]
        assert replaced["created_at"] == item["created_at"]
        assert replaced["updated_at"] >= item["updated_at"]
        assert replaced["metadata"] == {}
        assert self.texts(await self.search(bus, "6543")) == [replaced["text"]]
        assert await self.search(bus, "5433") == []

        gone = await self.call(bus, "memory::delete", {"id": item["id"]})
        assert gone == {"schema_version": 1, "deleted": True}
        assert await self.code_of(bus, "memory::get", {"id": item["id"]}) == "not_found"
        again_gone = await self.call(bus, "memory::delete", {"id": item["id"]})
        assert again_gone["deleted"] is False
        assert await self.search(bus, "staging database") == []

    async def test_ids_are_unique_and_list_pages_newest_first(self, bus: Engine) -> None:
        replies = await asyncio.gather(*(self.save(bus, f"note number {i}") for i in range(12)))
        ids = [reply["item"]["id"] for reply in replies]
        assert len(set(ids)) == 12
        await self.save(bus, "the newest note")
        first = await self.call(bus, "memory::list", {"limit": 5})
        assert first["has_more"] is True
        assert first["items"][0]["text"] == "the newest note"
        stamps = [item["updated_at"] for item in first["items"]]
        assert stamps == sorted(stamps, reverse=True)
        seen = list(first["items"])
        offset = 5
        while True:
            page = await self.call(bus, "memory::list", {"limit": 5, "offset": offset})
            seen += page["items"]
            offset += 5
            if not page["has_more"]:
                break
        assert len(seen) == 13
        assert len({item["id"] for item in seen}) == 13

    async def test_items_outlive_the_worker(self, engine_url: str, config: dict[str, Any]) -> None:
        async with self.hosted(engine_url, config) as bus:
            saved = await self.save(bus, "Ada prefers tea to coffee", scope=ALICE)
        async with self.hosted(engine_url, config) as bus:
            item = await self.call(bus, "memory::get", {"id": saved["item"]["id"], "scope": ALICE})
            assert item == saved["item"]
            assert self.texts(await self.search(bus, "tea", scope=ALICE)) == [item["text"]]

    # -- search --------------------------------------------------------------------------------
    async def test_search_ranks_the_more_relevant_first(self, bus: Engine) -> None:
        await self.save(bus, "The deploy key lives in the vault.")
        best = "Deploy notes: the deploy key rotates monthly; the deploy script reads the key."
        await self.save(bus, best)
        await self.save(bus, "Lunch is at noon on Fridays.")
        hits = await self.search(bus, "deploy key rotates")
        assert self.texts(hits)[0] == best
        assert len(hits) == 2  # any of the words matches; lunch matches none
        scores = [hit["score"] for hit in hits]
        assert scores == sorted(scores, reverse=True)
        assert all(0 < score < 1 for score in scores)
        assert len(await self.search(bus, "deploy", limit=1)) == 1

    async def test_a_runs_tenant_bounds_every_scope(self, bus: Engine) -> None:
        """A call made for a run names scopes within its principal's tenant: another tenant's
        memory is never reached, whatever scope id the model writes."""

        def run_of(tenant: str) -> dict[str, Any]:
            principal = {"id": "alice", "tenant": tenant}
            return {"_call": {"session_id": "s", "function_call_id": "c", "principal": principal}}

        saved = await self.call(
            bus, "memory::save", {"text": "acme's deploy key is in vault 7", **run_of("acme")}
        )
        item_id = saved["item"]["id"]
        assert saved["item"]["scope"] == {"kind": "workspace", "id": "acme:default"}
        for scope in (None, {"kind": "workspace", "id": "acme:default"}):
            named = {} if scope is None else {"scope": scope}
            beta = {**named, **run_of("beta")}
            assert await self.code_of(bus, "memory::get", {"id": item_id, **beta}) == "not_found"
            found = await self.call(bus, "memory::search", {"query": "deploy", **beta})
            assert found["hits"] == []
        assert await self.search(bus, "deploy") == []  # nor the default tenant's
        mine = await self.call(bus, "memory::search", {"query": "deploy", **run_of("acme")})
        assert [hit["item"]["id"] for hit in mine["hits"]] == [item_id]

    async def test_scopes_are_isolated(self, bus: Engine) -> None:
        saved = await self.save(bus, "Alice's locker code is 4711", scope=ALICE)
        item_id = saved["item"]["id"]
        assert saved["item"]["scope"] == ALICE
        assert self.texts(await self.search(bus, "locker", scope=ALICE)) == [
            "Alice's locker code is 4711"
        ]
        assert await self.search(bus, "locker", scope=BOB) == []
        assert await self.search(bus, "locker") == []
        agent = {"kind": "agent", "id": "alice"}  # same id, another kind: another scope
        assert await self.search(bus, "locker", scope=agent) == []
        assert await self.code_of(bus, "memory::get", {"id": item_id, "scope": BOB}) == "not_found"
        assert (await self.call(bus, "memory::list", {"scope": BOB}))["items"] == []
        gone = await self.call(bus, "memory::delete", {"id": item_id, "scope": BOB})
        assert gone["deleted"] is False
        # The same id in two scopes is two items.
        await self.save(bus, "Bob's locker code is 1234", scope=BOB, id=item_id)
        got = await self.call(bus, "memory::get", {"id": item_id, "scope": ALICE})
        assert got["text"] == "Alice's locker code is 4711"

    async def test_metadata_filters_search_and_list(self, bus: Engine) -> None:
        await self.save(bus, "Build runs on the big runner", metadata={"topic": "ci", "n": 2})
        await self.save(bus, "Travel runs through Berlin", metadata={"topic": "travel", "n": 2})
        await self.save(bus, "Runs without labels")
        hits = await self.search(bus, "runs", metadata={"topic": "ci"})
        assert self.texts(hits) == ["Build runs on the big runner"]
        assert hits[0]["item"]["metadata"] == {"topic": "ci", "n": 2}
        both = await self.search(bus, "runs", metadata={"n": 2})
        assert len(both) == 2
        none = await self.search(bus, "runs", metadata={"topic": "ci", "n": 3})
        assert none == []
        listed = await self.call(bus, "memory::list", {"metadata": {"topic": "travel"}})
        assert [item["text"] for item in listed["items"]] == ["Travel runs through Berlin"]
        bad_key = {"query": "runs", "metadata": {"a'b": "x"}}
        assert await self.code_of(bus, "memory::search", bad_key) == "invalid_request"

    async def test_unicode_text_round_trips_and_is_found(self, bus: Engine) -> None:
        texts = ["Привет мир, это память", "Der Bär isst Äpfel", "東京 タワー は 高い"]
        texts.append("emoji 🚀 ok")
        for text in texts:
            await self.save(bus, text)
        assert self.texts(await self.search(bus, "мир")) == [texts[0]]
        assert self.texts(await self.search(bus, "Bär")) == [texts[1]]
        assert self.texts(await self.search(bus, "東京")) == [texts[2]]
        listed = await self.call(bus, "memory::list", {})
        assert sorted(item["text"] for item in listed["items"]) == sorted(texts)

    async def test_query_syntax_is_never_read_as_syntax(self, bus: Engine) -> None:
        await self.save(bus, "The deploy key lives in the vault")
        for query in FTS_LOOKING_QUERIES:
            hits = await self.search(bus, query)
            assert isinstance(hits, list), query
        assert self.texts(await self.search(bus, "vault OR (")) == [
            "The deploy key lives in the vault"
        ]
        assert self.texts(await self.search(bus, '"vault" AND "nothing"')) == [
            "The deploy key lives in the vault"
        ]

    # -- refusals ------------------------------------------------------------------------------
    async def test_large_text_and_metadata_are_too_large(self, bus: Engine) -> None:
        assert await self.code_of(bus, "memory::save", {"text": "x" * 20_000}) == "too_large"
        big = {"text": "ok", "metadata": {"blob": "y" * 5000}}
        assert await self.code_of(bus, "memory::save", big) == "too_large"
        assert (await self.call(bus, "memory::list", {}))["items"] == []

    async def test_bad_requests_are_invalid_request(self, bus: Engine) -> None:
        bad = [
            ("memory::save", {"text": ""}),
            ("memory::save", {"text": "x", "scope": {"kind": "team", "id": "a"}}),
            ("memory::save", {"text": "x", "id": "has space"}),
            ("memory::search", {"query": "x", "limit": 51}),
            ("memory::search", {"query": ""}),
            ("memory::get", {}),
            ("memory::list", {"limit": 0}),
        ]
        for function_id, payload in bad:
            assert await self.code_of(bus, function_id, payload) == "invalid_request", payload
