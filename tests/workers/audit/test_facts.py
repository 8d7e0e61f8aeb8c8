"""What each event makes in the audit log (pure), and the reader of ``audit::facts``: a log kept
with another engine (its cursor past this stream's end) reads this stream from the start."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path

from tackroom.contracts.audit import FACTS, FACTS_GROUP, AuditFact
from tackroom.contracts.events import (
    AgentEndData,
    ApprovalResolvedData,
    BudgetDecidedData,
    ErrorData,
    FunctionExecutionEndData,
    FunctionExecutionStartData,
    GateDecidedData,
    MessageUpdateData,
    TurnStateChangedData,
    event_of,
)
from tackroom.contracts.messages import FunctionResultMessage, TextBlock
from tackroom.contracts.principal import Principal
from tackroom.engine.factory import open_engine
from tackroom.engine.protocol import Engine
from tackroom.kit.audit import digest
from tackroom.kit.audit_facts import fact_of
from tackroom.testing import MEMORY_URL, wait_until
from tackroom.workers.audit.reader import FactReader
from tackroom.workers.audit.store import AuditStore

SECRET = "sk-planted-secret"
ALICE = Principal(id="alice", roles=("ops",))


def made(data: object) -> AuditFact | None:
    event = event_of(session_id="s1", run_id="r1", event_id="r1:k", data=data)  # type: ignore[arg-type]
    return fact_of(event)


def test_each_security_relevant_event_makes_its_fact() -> None:
    started = made(
        TurnStateChangedData(
            from_="provisioning", to="assistant_streaming", turn_count=0, principal=ALICE
        )
    )
    assert started is not None
    assert (started.kind, started.principal, started.fact_id) == (
        "run_started",
        ALICE,
        "event:r1:k",
    )
    later = TurnStateChangedData(from_="assistant_streaming", to="steering_check", turn_count=1)
    assert made(later) is None
    assert made(MessageUpdateData(message_id="m", kind="text", delta=SECRET)) is None

    gate = made(
        GateDecidedData(
            function_call_id="c1",
            function_id="fs::write",
            decision="deny",
            decided_by="policy",
            rule_id="no-writes",
            principal="alice",
            matched_constraint={"arg": "path", "op": "under", "value": "/"},
        )
    )
    assert gate is not None
    assert gate.fact["rule_id"] == "no-writes"
    assert gate.fact["matched_constraint"] == {"arg": "path", "op": "under", "value": "/"}
    assert gate.principal == Principal(id="alice")

    budget = made(
        BudgetDecidedData(
            allowed=False,
            estimate_usd=0.5,
            reason="over_limit",
            detail="$10 cap reached",
            budget_id="team",
        )
    )
    assert budget is not None
    assert budget.kind == "budget_decision"
    assert budget.fact == {
        "allowed": False,
        "estimate_usd": 0.5,
        "reason": "over_limit",
        "budget_id": "team",
    }

    approval = made(
        ApprovalResolvedData(
            function_call_id="c1",
            function_id="fs::write",
            decision="allow",
            approver="bob",
            decided_at=5.0,
        )
    )
    assert approval is not None
    assert (approval.actor, approval.at) == ("bob", 5.0)

    arguments = {"path": "a", "content": SECRET}
    call = made(
        FunctionExecutionStartData(
            function_call_id="c1", function_id="fs::write", arguments=arguments
        )
    )
    assert call is not None
    assert call.fact["arguments_digest"] == digest(arguments)
    result = FunctionResultMessage(
        function_call_id="c1", function_id="fs::write", content=[TextBlock(text=SECRET)]
    )
    end = made(
        FunctionExecutionEndData(function_call_id="c1", function_id="fs::write", result=result)
    )
    assert end is not None
    assert end.kind == "tool_result"

    failed = made(AgentEndData(state="failed", error=ErrorData(kind="provider", message=SECRET)))
    assert failed is not None
    assert failed.fact["error_kind"] == "provider"
    for fact in (started, gate, budget, approval, call, end, failed):
        assert SECRET not in fact.model_dump_json()


async def test_a_cursor_past_the_stream_reads_it_from_the_start(tmp_path: Path) -> None:
    store = AuditStore.open(tmp_path / "audit.db")
    store.append_read([AuditFact(fact_id="elsewhere", kind="run_end")], facts_seq=50)
    engine = open_engine(MEMORY_URL)
    await engine.start()
    try:
        for n in range(3):
            fact = AuditFact(fact_id=f"here-{n}", kind="run_end")
            await FACTS.append(engine, FACTS_GROUP, fact)
        reader = FactReader(engine, store, keep_days=1.0)
        task = asyncio.create_task(reader.run())
        await reader.caught_up()
        await reader.reached(3)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    finally:
        await engine.close()
    _, _, records = store.page(after=0, since=None, session_id=None, limit=10)
    assert [r["fact_id"] for r in records] == ["elsewhere", "here-0", "here-1", "here-2"]
    assert store.facts_cursor() == 3
    store.close()


class CountingStore(AuditStore):
    """An audit store that notes the size of each batch the reader records."""

    def __init__(self, db: sqlite3.Connection, path: Path, clock: Callable[[], float]) -> None:
        super().__init__(db, path, clock)
        self.batches: list[int] = []

    def append_read(self, facts: Sequence[AuditFact], *, facts_seq: int) -> None:
        self.batches.append(len(facts))
        super().append_read(facts, facts_seq=facts_seq)


async def appended(engine: Engine, count: int) -> None:
    async with engine.transaction():
        for n in range(count):
            await FACTS.append(engine, FACTS_GROUP, AuditFact(fact_id=f"f{n}", kind="run_end"))


@contextlib.asynccontextmanager
async def hour_batches(store: AuditStore) -> AsyncIterator[tuple[Engine, FactReader]]:
    """A reading reader whose live facts would wait an hour for the next ones; cancelled on
    exit, with its engine closed."""
    engine = open_engine(MEMORY_URL)
    await engine.start()
    reader = FactReader(engine, store, keep_days=1.0, batch_seconds=3600.0)
    task = asyncio.create_task(reader.run())
    try:
        await reader.caught_up()
        yield engine, reader
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await engine.close()


async def test_live_facts_are_recorded_together_and_at_once_when_awaited(tmp_path: Path) -> None:
    store = CountingStore.open(tmp_path / "audit.db")
    async with hour_batches(store) as (engine, reader):
        await appended(engine, 5)
        async with asyncio.timeout(10):  # the batch would wait an hour: reached() cuts it short
            await reader.reached(5)
        assert store.batches == [5]
    store.close()


async def test_stopping_records_the_facts_taken(tmp_path: Path) -> None:
    store = CountingStore.open(tmp_path / "audit.db")
    async with hour_batches(store) as (engine, reader):
        await appended(engine, 3)
        await wait_until(lambda: reader.received == 3)
        assert store.batches == []  # waiting for the next ones
    _, _, records = store.page(after=0, since=None, session_id=None, limit=10)
    assert [r["fact_id"] for r in records] == ["f0", "f1", "f2"]
    assert (store.batches, store.facts_cursor()) == ([3], 3)
    store.close()
