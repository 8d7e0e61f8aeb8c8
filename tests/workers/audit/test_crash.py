"""SIGKILL of a harness at random instants of a multi-tool turn leaves an audit log that verifies,
holds each fact once, and — once an audit worker has read on — a fact for every security-relevant
event the engine kept. Real child processes (``tests/faults/workload.py``), both backends."""

from __future__ import annotations

from pathlib import Path

import pytest

from tackroom.contracts.audit import EXPORT, VERIFY, ExportRequest, VerifyRequest
from tackroom.contracts.events import EVENTS
from tackroom.engine.factory import open_engine
from tackroom.kit.audit_facts import fact_of
from tackroom.runtime.config import HarnessConfig
from tackroom.runtime.host import Host
from tackroom.runtime.registry import load_worker
from tackroom.testing.backends import BACKENDS, engine_url_for
from tests.faults.procs import run_child
from tests.faults.report import rng
from tests.faults.workload import SESSION
from tests.turn.harness import turn_of

pytestmark = [pytest.mark.parametrize("backend", list(BACKENDS)), pytest.mark.timeout(240)]

KILLS = 3


async def audited(url: str, workdir: Path) -> tuple[bool, list[str], set[str]]:
    """Boot an audit worker alone on the engine: does the log verify, which fact ids does it
    hold, which facts do the stored events make?"""
    config = HarnessConfig.model_validate(
        {"schema_version": 1, "worker_config": {"audit": {"path": str(workdir / "audit.db")}}}
    )
    host = Host(engine=open_engine(url), workers=[load_worker("audit")], config=config)
    async with host:
        report = await VERIFY.call(host.engine, VerifyRequest())
        page = await EXPORT.call(host.engine, ExportRequest(limit=10_000))
        stored = await host.engine.read(EVENTS.name, SESSION, limit=10_000)
    expected = set()
    for record in stored:
        fact = fact_of(EVENTS.parse(record.data))
        if fact is not None:
            expected.add(fact.fact_id)
    assert report.ok, report.problem
    return report.ok, [r["fact_id"] for r in page.records], expected


async def started(url: str) -> bool:
    """Whether a killed child got as far as starting the run (a kill may land before)."""
    engine = open_engine(url)
    await engine.start()
    try:
        return await turn_of(engine, SESSION) is not None
    finally:
        await engine.close()


async def baseline(backend: str, workdir: Path) -> float:
    """Seconds from boot to the end of an uninterrupted run on this machine now: kills are drawn
    inside it, so they land inside the run however fast or loaded the machine is."""
    url = engine_url_for(backend, workdir)
    child = await run_child(url, workdir, "turn", "--phase=first", name="baseline")
    assert child.booted_at is not None
    assert child.finished_at is not None
    return max(0.05, child.finished_at - child.booted_at)


async def test_a_killed_harness_leaves_a_whole_audit_log(backend: str, tmp_path: Path) -> None:
    rand = rng(f"audit-kill:{backend}")
    (tmp_path / "baseline").mkdir()
    span = await baseline(backend, tmp_path / "baseline")
    url = engine_url_for(backend, tmp_path)
    cursor, ended, kills = 0, False, 0
    for attempt in range(KILLS + 1):
        last = attempt == KILLS
        child = await run_child(
            url,
            tmp_path,
            "turn",
            "--phase=resume" if await started(url) else "--phase=first",
            f"--after={cursor}",
            name=f"child-{attempt}",
            # A resumed run has less left to do: its kill is drawn from the first half.
            kill_after=None if last else rand.uniform(0.0, span if attempt == 0 else span / 2),
        )
        cursor = max([cursor, *(e["seq"] for e in child.events)])
        kills += child.killed
        assert child.tracebacks() == 0, child.stderr()[-2000:]
        if child.finished():
            ended = True
            break
    assert ended, "the last harness did not finish the run"
    assert kills >= 1, "no kill landed inside the run"
    ok, ids, expected = await audited(url, tmp_path)
    assert ok
    assert len(ids) == len(set(ids)), "a fact recorded twice"
    assert expected <= set(ids), sorted(expected - set(ids))
    kinds = {fact_id.rsplit(":", 1)[-1] for fact_id in expected}
    assert {"start", "end"} <= kinds
