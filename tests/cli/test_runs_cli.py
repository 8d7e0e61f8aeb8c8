"""``tackroom runs abort|holds|resume`` and ``tackroom audit flows`` as real processes against a
running ``tackroom serve``; and the one line they say when nothing serves the switch."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tackroom.contracts.runholds import RUNS_HELD_ERROR
from tackroom.contracts.turn import RUN_START
from tackroom.engine.errors import InvocationError
from tackroom.runtime import LocalClient
from tackroom.testing.cli import run_tackroom

from .test_approvals_cli import Served, serve, stop


@pytest.fixture
async def served(short_tmp: Path) -> AsyncIterator[Served]:
    running = await serve(short_tmp, workers="engine, sessions, orchestrator")
    try:
        yield running
    finally:
        if running.proc.returncode is None:
            running.proc.kill()
            await running.proc.wait()


async def test_abort_holds_resume(served: Served) -> None:
    cwd = served.cwd
    held = await run_tackroom("runs", "abort", "--tenant", "acme", "--reason", "injection", cwd=cwd)
    assert held.code == 0, held.stderr
    assert held.stdout.strip() == (
        "kill switch is on for tenant acme: new runs are refused; 0 run(s) in flight aborted"
    )
    listed = await run_tackroom("runs", "holds", "--tenant", "acme", "--json", cwd=cwd)
    assert json.loads(listed.stdout)["everyone"]["reason"] == "injection"

    start = {
        "session_id": "acme:s1",
        "provider": "scripted",
        "model": "demo",
        "principal": {"id": "alice", "tenant": "acme"},
    }
    async with LocalClient(served.socket) as client:
        with pytest.raises(InvocationError) as refused:
            await client.trigger(RUN_START.id, start)
    assert refused.value.remote_code == RUNS_HELD_ERROR
    assert "tackroom runs resume --tenant acme" in refused.value.message

    lifted = await run_tackroom("runs", "resume", "--tenant", "acme", cwd=cwd)
    assert lifted.stdout.strip() == "kill switch lifted for tenant acme: runs may start again"
    again = await run_tackroom("runs", "resume", "--tenant", "acme", cwd=cwd)
    assert again.stdout.strip() == "no kill switch was on for tenant acme"

    flows = await run_tackroom("audit", "flows", "--source", "http::fetch", "--json", cwd=cwd)
    assert flows.code == 0, flows.stderr
    assert json.loads(flows.stdout)["runs"] == []
    await stop(served)


async def test_without_a_serving_harness_one_line(short_tmp: Path) -> None:
    (short_tmp / "tackroom.yaml").write_text(
        "schema_version: 1\nengine: embedded:state/engine.db\nworkers: [engine]\n"
    )
    reply = await run_tackroom("runs", "abort", "--tenant", "acme", "--reason", "x", cwd=short_tmp)
    assert reply.code == 1
    assert reply.stderr.strip() == (
        "tackroom: error: no orchestrator answers runs::hold: the kill switch acts on a running"
        " harness; run this where `tackroom serve` runs (or on its NATS engine)"
    )
