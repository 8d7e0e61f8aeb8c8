"""Retention beside the audit: ``agent::events`` trimmed by the orchestrator's configured bound,
and the audit worker archiving by ``retention_days`` at start, its kept chain still verifying."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tackroom.contracts.audit import STATUS, VERIFY, StatusRequest, VerifyRequest
from tackroom.contracts.events import EVENTS
from tackroom.harness import Harness
from tackroom.runtime.config import HarnessConfig
from tackroom.testing import wait_until

ADD = {"function_id": "calc::add", "arguments": {"a": 1, "b": 2}}
CHATTY = [{"tool_calls": [{**ADD, "id": f"c{n}"} for n in range(40)]}, {"text": "done"}]


async def test_the_event_stream_keeps_at_most_its_bound(tmp_path: Path) -> None:
    config = HarnessConfig.model_validate(
        {"schema_version": 1, "worker_config": {"orchestrator": {"events_max_per_session": 100}}}
    )
    harness = Harness(
        "scripted:demo", home=tmp_path, script=CHATTY * 2, config=config, tools=["calc::*"]
    )
    async with harness as h:
        for _ in range(2):
            await h.run("talk", session="s1")
        stored = await h.engine.read(EVENTS.name, "s1", limit=10_000)
    assert len(stored) == 100
    assert stored[0].seq > 1  # the oldest went
    assert stored[-1].data["type"] == "agent_end"


async def test_old_audit_records_are_archived_and_the_chain_still_verifies(tmp_path: Path) -> None:
    async with Harness("scripted:demo", home=tmp_path, script=[{"text": "hi"}]) as h:
        await h.run("hello", session="s1")
        await wait_until(lambda: _holds(h, 3), message="the run's facts recorded")
    with sqlite3.connect(tmp_path / "audit.db") as db:  # a week passes
        db.execute("UPDATE records SET ts = ts - 7 * 86400")
    config = HarnessConfig.model_validate(
        {"schema_version": 1, "worker_config": {"audit": {"retention_days": 1}}}
    )
    async with Harness("scripted:demo", home=tmp_path, script=[], config=config) as h:
        await wait_until(lambda: _archived(h), message="the records archived at start")
        report = await VERIFY.call(h.engine, VerifyRequest())
        status = await STATUS.call(h.engine, StatusRequest())
    assert report.ok, report.problem
    assert status.anchor.first_seq > 1
    [archive] = (tmp_path / "audit-archive").glob("audit-*.jsonl")
    from tackroom.cli.audit import verify_file

    check = verify_file(archive.read_bytes())
    assert check.problem is None
    assert check.last_seq == status.anchor.first_seq - 1
    assert check.last_hash == status.anchor.prev_hash


async def _holds(h: Harness, count: int) -> bool:
    return (await STATUS.call(h.engine, StatusRequest())).records >= count


async def _archived(h: Harness) -> bool:
    return (await STATUS.call(h.engine, StatusRequest())).anchor.first_seq > 1
