"""The contract of a trace store (``traces::*``): what it reads, what it answers.

A store that replaces ``traces`` (one forwarding to another backend, say) proves it fits by
running this suite: subclass :class:`TracesContract`, name the worker and, if it needs one, its
config section for a test (:meth:`TracesContract.store_config`)::

    class TestMyStore(TracesContract):
        worker_name = "my-traces"

The suite writes :class:`~tackroom.contracts.traces.SpanBatch` records to ``traces::spans``
(group ``spans``) as the ``bus`` exporter does, then asks through ``engine.trigger`` only. A
store reads the stream asynchronously, so answers are awaited (up to ``CONTRACT_TIMEOUT``).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from tackroom.engine import Engine
from tackroom.engine.errors import InvocationError
from tackroom.testing import wait_until
from tackroom.testing.contracts.base import CONTRACT_TIMEOUT, WorkerContract
from tackroom.testing.engines import running_engine

__all__ = ["TracesContract", "span"]

STREAM, GROUP = "traces::spans", "spans"
_NOW = time.time_ns()


def span(
    trace: str,
    span_id: str,
    *,
    parent: str | None = None,
    name: str = "work",
    start_ms: float = 0,
    end_ms: float = 1,
    status: str = "ok",
    **attributes: Any,
) -> dict[str, Any]:
    """A span record as the bus exporter writes it; ``trace`` and ``span_id`` are padded to
    32 and 16 hex digits, times are milliseconds after the suite started."""
    return {
        "trace_id": trace.rjust(32, "0"),
        "span_id": span_id.rjust(16, "0"),
        "parent_span_id": None if parent is None else parent.rjust(16, "0"),
        "name": name,
        "kind": "internal",
        "start_ns": _NOW + int(start_ms * 1e6),
        "end_ns": _NOW + int(end_ms * 1e6),
        "status": status,
        "status_message": "it broke" if status == "error" else None,
        "attributes": {key.replace("__", "."): value for key, value in attributes.items()},
        "events": [],
        "service_name": "contract",
    }


def _batch(*spans: dict[str, Any], dropped: int = 0) -> dict[str, Any]:
    return {"schema_version": 1, "dropped": dropped, "spans": list(spans)}


class TracesContract(WorkerContract):
    worker_name: ClassVar[str] = "traces"

    def store_config(self, tmp_path: Path) -> dict[str, Any] | None:
        """The worker's config section for one test (the shipped store: a file in ``tmp_path``)."""
        return {"path": str(tmp_path / "traces.db")}

    @pytest.fixture
    async def bus(self, engine_url: str, tmp_path: Path) -> AsyncIterator[Engine]:
        async with self.hosted(engine_url, self.store_config(tmp_path)) as engine:
            yield engine

    # -- helpers -------------------------------------------------------------------------------
    @staticmethod
    async def ship(bus: Engine, *spans: dict[str, Any], dropped: int = 0) -> None:
        await bus.append(STREAM, GROUP, _batch(*spans, dropped=dropped))

    async def trace(self, bus: Engine, trace: str, *, spans: int) -> dict[str, Any]:
        """``traces::get`` of ``trace`` once it holds ``spans`` spans."""
        found: dict[str, Any] = {}

        async def stored() -> bool:
            try:
                found.update(await self.call(bus, "traces::get", {"trace_id": trace}))
            except InvocationError as exc:
                if exc.remote_code != "not_found":
                    raise
                return False
            return len(found["spans"]) >= spans

        await wait_until(
            stored, timeout=CONTRACT_TIMEOUT, message=lambda: f"{spans} spans of {trace}: {found}"
        )
        return found

    async def listed(self, bus: Engine, **request: Any) -> dict[str, Any]:
        reply: dict[str, Any] = await self.call(bus, "traces::list", request)
        assert reply["schema_version"] == 1
        return reply

    # -- tests ---------------------------------------------------------------------------------
    async def test_a_trace_comes_back_with_its_tree_and_attributes(self, bus: Engine) -> None:
        trace = "a1".rjust(32, "0")
        await self.ship(
            bus,
            span("a1", "1", name="trigger run::start", end_ms=30, run__id="r1", session__id="s1"),
            span("a1", "2", parent="1", name="queue turn::step", start_ms=2, end_ms=29),
            span(
                "a1", "3", parent="2", name="chat m", start_ms=5, end_ms=9,
                gen_ai__usage__input_tokens=12, gen_ai__response__finish_reasons=["stop"],
            ),
        )  # fmt: skip
        got = await self.trace(bus, trace, spans=3)
        assert (got["trace_id"], got["run_id"], got["session_id"]) == (trace, "r1", "s1")
        spans = got["spans"]
        assert [s["name"] for s in spans] == ["trigger run::start", "queue turn::step", "chat m"]
        parents = [s["parent_span_id"] for s in spans]
        assert parents == [None, spans[0]["span_id"], spans[1]["span_id"]]
        assert spans[2]["attributes"] == {
            "gen_ai.usage.input_tokens": 12,
            "gen_ai.response.finish_reasons": ["stop"],
        }
        assert spans[2]["end_ns"] - spans[2]["start_ns"] == 4_000_000
        assert {s["status"] for s in spans} == {"ok"}

    async def test_list_is_newest_first_by_run_and_session_and_grouped(self, bus: Engine) -> None:
        await self.ship(
            bus,
            span("b1", "1", name="first", start_ms=0, end_ms=5, run__id="r1", session__id="s1"),
            span("b2", "1", name="second", start_ms=10, end_ms=12, run__id="r2", session__id="s2"),
            span("b3", "1", name="third", start_ms=20, end_ms=30, run__id="r3", session__id="s1"),
        )
        await self.trace(bus, "b3".rjust(32, "0"), spans=1)
        await self.trace(bus, "b1".rjust(32, "0"), spans=1)
        everything = await self.listed(bus)
        names = [t["root_name"] for t in everything["traces"]]
        assert names == ["third", "second", "first"]
        third = everything["traces"][0]
        assert (third["run_id"], third["session_id"], third["span_count"]) == ("r3", "s1", 1)
        assert (third["duration_ms"], third["status"]) == (10.0, "ok")
        groups = [(g["session_id"], len(g["trace_ids"])) for g in everything["sessions"]]
        assert groups == [("s1", 2), ("s2", 1)]
        session = await self.listed(bus, session_id="s1")
        assert [t["root_name"] for t in session["traces"]] == ["third", "first"]
        run = await self.listed(bus, run_id="r2")
        assert [t["root_name"] for t in run["traces"]] == ["second"]
        assert [t["root_name"] for t in (await self.listed(bus, limit=1))["traces"]] == ["third"]
        assert (await self.listed(bus, run_id="nobody"))["traces"] == []

    async def test_spans_of_one_trace_over_several_records_and_repeats(self, bus: Engine) -> None:
        trace = "c1".rjust(32, "0")
        child = span("c1", "2", parent="1", name="child", start_ms=1, end_ms=2, status="error")
        await self.ship(bus, child)
        await self.ship(bus, span("c1", "1", name="root", end_ms=4, session__id="s9"), child)
        got = await self.trace(bus, trace, spans=2)
        assert len(got["spans"]) == 2
        assert got["spans"][1]["status_message"] == "it broke"
        (summary,) = (await self.listed(bus, session_id="s9"))["traces"]
        assert (summary["root_name"], summary["span_count"]) == ("root", 2)
        assert (summary["status"], summary["error_count"]) == ("error", 1)

    async def test_records_written_while_no_store_ran_are_read(
        self, engine_url: str, tmp_path: Path
    ) -> None:
        async with self.hosted(engine_url, self.store_config(tmp_path)) as bus:
            await self.ship(bus, span("d1", "1", name="before"))
            await self.trace(bus, "d1".rjust(32, "0"), spans=1)
        async with running_engine(engine_url) as bus:  # the store is down
            await self.ship(bus, span("d2", "1", name="meanwhile"))
        async with self.hosted(engine_url, self.store_config(tmp_path)) as bus:
            await self.trace(bus, "d2".rjust(32, "0"), spans=1)
            names = [t["root_name"] for t in (await self.listed(bus))["traces"]]
            assert sorted(names) == ["before", "meanwhile"]

    async def test_typed_errors(self, bus: Engine) -> None:
        missing = await self.failure(bus, "traces::get", {"trace_id": "f" * 32})
        assert missing.remote_code == "not_found"
        bad = await self.failure(bus, "traces::get", {"trace_id": "not-a-trace"})
        assert bad.remote_code == "invalid_request"
        assert await self.code_of(bus, "traces::list", {"limit": 0}) == "invalid_request"

    async def test_status_counts_what_is_stored_and_what_was_lost(self, bus: Engine) -> None:
        await self.ship(bus, span("e1", "1"), span("e1", "2", parent="1"), dropped=3)
        await self.trace(bus, "e1".rjust(32, "0"), spans=2)
        status = await self.call(bus, "traces::status", {})
        assert (status["traces"], status["spans"], status["dropped_spans"]) == (1, 2, 3)
