"""The contract of an audit log (``audit::*``), by function id.

Any worker that replaces ``audit`` proves it fits by running this suite: subclass
:class:`AuditContract`, name the worker and, if its config differs from the shipped worker's,
give its section for a test (:meth:`AuditContract.audit_config`)::

    class TestMyAudit(AuditContract):
        worker_name = "my-audit"

        def audit_config(self, directory: Path) -> dict[str, Any]:
            return {"dsn": ...}

        def tamper(self, config: dict[str, Any], seq: int) -> None:
            ...  # change a field of the stored record ``seq`` behind the worker's back

Facts go in through ``audit::append`` and the ``audit::facts`` stream; everything is read back
through ``audit::export``, ``audit::verify``, ``audit::status`` and ``audit::archive`` only. A
record's ``hash`` is :func:`tackroom.kit.audit.record_hash` of the record, and its ``prev_hash``
the ``hash`` of the record before it (:data:`~tackroom.contracts.audit.GENESIS_HASH` for the
first). Only tampering needs the storage itself: :meth:`AuditContract.tamper` does it, and the
suite skips that test where a subclass does not give one.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from tackroom.contracts.audit import FACTS, FACTS_GROUP, GENESIS_HASH
from tackroom.engine import Engine
from tackroom.kit.audit import record_hash
from tackroom.testing import wait_until
from tackroom.testing.contracts.base import CONTRACT_TIMEOUT, WorkerContract

__all__ = ["AuditContract"]


def fact(fact_id: str, kind: str = "tool_call", **fields: Any) -> dict[str, Any]:
    return {"fact_id": fact_id, "kind": kind, **fields}


def principal(user: str, tenant: str) -> dict[str, Any]:
    return {"id": user, "tenant": tenant}


class AuditContract(WorkerContract):
    worker_name: ClassVar[str] = "audit"

    def audit_config(self, directory: Path) -> dict[str, Any]:
        """The worker's config section for one test: its log under ``directory`` (the test's
        own), with no retention of its own."""
        return {"path": str(directory / "audit.db"), "archive_dir": str(directory / "archive")}

    def tamper(self, config: dict[str, Any], seq: int) -> None:
        """Change one field of the stored record ``seq`` in the log ``config`` names, behind the
        worker's back (the record stays well-formed; its hash no longer matches). The default
        skips the test that needs it."""
        pytest.skip("no tamper(config, seq) hook: the suite cannot reach this log's storage")

    @pytest.fixture
    def config(self, tmp_path: Path) -> dict[str, Any]:
        return self.audit_config(tmp_path)

    @pytest.fixture
    async def bus(self, engine_url: str, config: dict[str, Any]) -> AsyncIterator[Engine]:
        async with self.hosted(engine_url, config) as engine:
            yield engine

    # -- helpers -------------------------------------------------------------------------------
    async def append(self, bus: Engine, fact_id: str, **fields: Any) -> dict[str, Any]:
        reply: dict[str, Any] = await self.call(
            bus, "audit::append", {"fact": fact(fact_id, **fields)}
        )
        return reply

    async def export(self, bus: Engine, **request: Any) -> dict[str, Any]:
        page: dict[str, Any] = await self.call(bus, "audit::export", request)
        assert page["schema_version"] == 1
        return page

    async def ids(self, bus: Engine, **request: Any) -> list[str]:
        return [r["fact_id"] for r in (await self.export(bus, **request))["records"]]

    # -- recording -----------------------------------------------------------------------------
    async def test_appended_records_come_back_in_order_and_chained(self, bus: Engine) -> None:
        alice = principal("alice", "acme")
        replies = [
            await self.append(bus, "f1", kind="run_started", principal=alice, run_id="r1"),
            await self.append(bus, "f2", session_id="s1", fact={"function_id": "fs::read"}),
            await self.append(bus, "f3", kind="run_end", actor="orchestrator", at=1.5),
        ]
        assert [(r["seq"], r["duplicate"]) for r in replies] == [(1, False), (2, False), (3, False)]
        page = await self.export(bus)
        records = page["records"]
        assert [(r["seq"], r["fact_id"], r["kind"]) for r in records] == [
            (1, "f1", "run_started"), (2, "f2", "tool_call"), (3, "f3", "run_end")
        ]  # fmt: skip
        assert (records[0]["principal"]["id"], records[0]["principal"]["tenant"]) == (
            "alice", "acme"
        )  # fmt: skip
        assert (records[1]["session_id"], records[1]["fact"]) == ("s1", {"function_id": "fs::read"})
        assert (records[2]["actor"], records[2]["at"]) == ("orchestrator", 1.5)
        previous = GENESIS_HASH
        for record, reply in zip(records, replies, strict=True):
            assert record["prev_hash"] == previous
            assert record["hash"] == record_hash(record) == reply["hash"]
            assert record["time"]
            previous = record["hash"]
        assert (page["head_seq"], page["head_hash"], page["next_after"]) == (3, previous, None)
        assert page["anchor"] == {"schema_version": 1, "first_seq": 1, "prev_hash": GENESIS_HASH}
        report = await self.call(bus, "audit::verify", {})
        assert (report["ok"], report["records"], report["problem"]) == (True, 3, None)
        assert (report["head_seq"], report["head_hash"]) == (3, previous)

    async def test_a_fact_is_recorded_once(self, bus: Engine) -> None:
        first = await self.append(bus, "once", fact={"n": 1})
        again = await self.append(bus, "once", fact={"n": 2})
        assert (again["seq"], again["hash"], again["duplicate"]) == (
            first["seq"], first["hash"], True
        )  # fmt: skip
        await bus.append(FACTS.name, FACTS_GROUP, fact("once", fact={"n": 3}))
        await self.append(bus, "after")
        records = (await self.export(bus))["records"]
        assert [(r["fact_id"], r["fact"]) for r in records] == [("once", {"n": 1}), ("after", {})]
        status = await self.call(bus, "audit::status", {})
        assert (status["records"], status["head_seq"]) == (2, 2)

    async def test_facts_on_the_stream_join_the_same_chain(self, bus: Engine) -> None:
        await self.append(bus, "by-call")
        await bus.append(FACTS.name, FACTS_GROUP, fact("by-stream", kind="policy_loaded"))

        async def recorded() -> bool:
            return "by-stream" in await self.ids(bus)

        await wait_until(recorded, timeout=CONTRACT_TIMEOUT, message="the streamed fact recorded")
        await self.append(bus, "by-call-2")
        assert await self.ids(bus) == ["by-call", "by-stream", "by-call-2"]
        assert (await self.call(bus, "audit::verify", {}))["ok"] is True

    # -- reading -------------------------------------------------------------------------------
    async def test_export_pages_and_filters_by_session(self, bus: Engine) -> None:
        for n in range(1, 6):
            await self.append(bus, f"p{n}", session_id="odd" if n % 2 else "even")
        first = await self.export(bus, limit=2)
        assert ([r["seq"] for r in first["records"]], first["next_after"]) == ([1, 2], 2)
        second = await self.export(bus, after_seq=2, limit=2)
        assert ([r["seq"] for r in second["records"]], second["next_after"]) == ([3, 4], 4)
        last = await self.export(bus, after_seq=4, limit=2)
        assert ([r["seq"] for r in last["records"]], last["next_after"]) == ([5], None)
        assert last["head_seq"] == 5
        assert await self.ids(bus, session_id="even") == ["p2", "p4"]
        assert await self.ids(bus, session_id="none") == []

    async def test_export_by_tenant_shows_that_tenants_records_only(self, bus: Engine) -> None:
        await self.append(bus, "acme-1", principal=principal("alice", "acme"), run_id="ra")
        await self.append(bus, "other-1", principal=principal("bob", "other"))
        await self.append(bus, "acme-2", session_id="acme:s1")
        await self.append(bus, "other-2", session_id="other:s2", run_id="rb")
        await self.append(bus, "plain", session_id="s3")
        await self.append(bus, "acme-3", run_id="ra")  # names only the run: its principal's
        await self.append(bus, "nobody")
        assert await self.ids(bus, tenant="acme") == ["acme-1", "acme-2", "acme-3"]
        assert await self.ids(bus, tenant="other") == ["other-1", "other-2"]
        assert await self.ids(bus, tenant="default") == ["plain", "nobody"]
        assert await self.ids(bus, tenant="stranger") == []
        assert await self.ids(bus, tenant="acme", session_id="other:s2") == []

    # -- the chain -----------------------------------------------------------------------------
    async def test_verify_names_a_tampered_record(
        self, bus: Engine, config: dict[str, Any]
    ) -> None:
        for n in range(1, 4):
            await self.append(bus, f"t{n}", fact={"n": n})
        assert (await self.call(bus, "audit::verify", {}))["ok"] is True
        self.tamper(config, 2)
        report = await self.call(bus, "audit::verify", {})
        assert report["ok"] is False
        assert (report["problem"]["seq"], report["problem"]["kind"]) == (2, "edited")

    async def test_archive_moves_old_records_and_the_rest_still_verifies(self, bus: Engine) -> None:
        empty = await self.call(bus, "audit::status", {})
        assert (empty["records"], empty["head_seq"], empty["head_hash"]) == (0, 0, GENESIS_HASH)
        assert empty["oldest"] is None
        kept = await self.call(bus, "audit::archive", {"older_than_days": 365})
        assert (kept["archived"], kept["file"]) == (0, None)
        hashes = [(await self.append(bus, f"a{n}"))["hash"] for n in range(1, 4)]
        moved = await self.call(bus, "audit::archive", {"older_than_days": 0})
        assert moved["archived"] == 3
        assert moved["file"]
        anchor = moved["anchor"]
        assert (anchor["first_seq"], anchor["prev_hash"]) == (4, hashes[-1])
        page = await self.export(bus)
        assert "a1" not in [r["fact_id"] for r in page["records"]]
        assert all(r["seq"] >= 4 for r in page["records"])
        assert page["anchor"] == anchor
        await self.append(bus, "later")
        report = await self.call(bus, "audit::verify", {})
        assert (report["ok"], report["anchor"]) == (True, anchor)
        status = await self.call(bus, "audit::status", {})
        assert status["records"] == status["head_seq"] - anchor["first_seq"] + 1

    # -- refusals ------------------------------------------------------------------------------
    async def test_bad_requests_are_typed_errors(self, bus: Engine) -> None:
        for bad in (
            {},
            {"fact": {"kind": "tool_call"}},
            {"fact": fact("", kind="tool_call")},
            {"fact": fact("x", kind="Not A Kind")},
            {"fact": fact("x", surprise=True)},
            {"fact": fact("x", principal={"id": "alice", "tenant": "Not:A:Tenant"})},
            {"fact": fact("x"), "surprise": True},
        ):
            assert await self.code_of(bus, "audit::append", bad) == "invalid_request", bad
        for export in ({"limit": 0}, {"after_seq": -1}, {"limit": 10_001}, {"surprise": 1}):
            assert await self.code_of(bus, "audit::export", export) == "invalid_request", export
        no_retention: dict[str, Any] = {}
        assert await self.code_of(bus, "audit::archive", no_retention) == "invalid_request"
        negative = {"older_than_days": -1}
        assert await self.code_of(bus, "audit::archive", negative) == "invalid_request"
        assert (await self.call(bus, "audit::status", {}))["records"] == 0
