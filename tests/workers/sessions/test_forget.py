"""Deleting a session forgets everything derived from it — its events, turn record, finished runs,
call ledger, approvals, workspace and traces — through the durable ``session-tree::deleted``
trigger of each owner, while another session's data stays and the audit log still verifies and
records the deletion. After a real scripted run with an approved file write, on both backends."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tackroom import Harness
from tackroom.contracts import approvals
from tackroom.contracts.audit import EXPORT, VERIFY, ExportRequest, VerifyRequest
from tackroom.contracts.events import EVENTS
from tackroom.contracts.forgetting import SESSION_DELETED
from tackroom.contracts.modelprompts import PROMPTS_SCOPE
from tackroom.contracts.sessions import DELETE, DeleteRequest
from tackroom.contracts.traces import LIST, ListRequest
from tackroom.engine import Engine
from tackroom.runtime.config import HarnessConfig
from tackroom.testing import wait_until
from tackroom.testing.backends import BACKENDS, engine_url_for
from tackroom.workers.orchestrator.dispatch import LEDGER_SCOPE
from tackroom.workers.orchestrator.record import RUNS_SCOPE, TURNS_SCOPE

WRITE = {"function_id": "fs::write", "arguments": {"path": "a.txt", "content": "hi"}, "id": "w1"}
SCRIPT = [{"tool_calls": [WRITE]}, {"text": "done"}]
CONFIG = HarnessConfig.model_validate(
    {"schema_version": 1, "tracing": {"exporters": ["bus"], "bus": {"flush_interval": 0.05}}}
)


async def derived(engine: Engine, session_id: str, workspaces: Path) -> dict[str, int]:
    """How much of each kind of session-derived data the engine, the trace store and the
    workspace root hold for ``session_id``."""
    own = f"{session_id}/"
    approval_keys = 0
    for scope in (approvals.PENDING_SCOPE, approvals.DECISIONS_SCOPE, approvals.HISTORY_SCOPE):
        approval_keys += len(await engine.list_state(scope.name, prefix=own))
    approval_keys += await engine.get_state(approvals.SETTINGS_SCOPE.name, session_id) is not None
    traces = await LIST.call(engine, ListRequest(session_id=session_id))
    return {
        "events": len(await engine.read(EVENTS.name, session_id)),
        "turn": int(await engine.get_state(TURNS_SCOPE, session_id) is not None),
        "turn_runs": len(await engine.list_state(RUNS_SCOPE, prefix=own)),
        "ledger": len(await engine.list_state(LEDGER_SCOPE, prefix=own)),
        "model_prompts": len(await engine.list_state(PROMPTS_SCOPE.name, prefix=own)),
        "approvals": approval_keys,
        "workspace": int((workspaces / session_id).exists()),
        "traces": len(traces.traces),
    }


async def run_with_approval(harness: Harness, session_id: str, *, runs: int) -> None:
    for _ in range(runs):
        result = await harness.run("go", session=session_id)
        for pending in result.pending:
            await harness.approvals.approve(pending)
        result = await harness.wait(result)
        assert result.state == "stopped", result


async def settled(engine: Engine, session_id: str, workspaces: Path) -> dict[str, int]:
    """``derived`` once every kind is there (the traces arrive through a stream)."""
    found: dict[str, Any] = {}

    async def complete() -> bool:
        found.update(await derived(engine, session_id, workspaces))
        return all(found.values())

    await wait_until(complete, message=lambda: f"all data of {session_id}: {found}")
    return dict(found)


@pytest.mark.parametrize("backend", list(BACKENDS))
async def test_a_deleted_session_leaves_only_its_audit_record(tmp_path: Path, backend: str) -> None:
    home = tmp_path / "home"
    workspaces = home / "workspaces"
    harness = Harness(
        "scripted:demo",
        home=home,
        engine=engine_url_for(backend, tmp_path),
        script=SCRIPT,
        tools=["fs::*"],
        config=CONFIG,
    )
    async with harness:
        engine = harness.engine
        await run_with_approval(harness, "gone", runs=2)  # the first run is kept in turn-runs
        await run_with_approval(harness, "kept", runs=2)
        await settled(engine, "gone", workspaces)
        kept = await settled(engine, "kept", workspaces)

        await DELETE.call(engine, DeleteRequest(session_id="gone", requested_by="alice"))

        left: dict[str, int] = {}

        async def forgotten() -> bool:
            left.update(await derived(engine, "gone", workspaces))
            return not any(left.values())

        await wait_until(forgotten, message=lambda: f"nothing of 'gone' left: {left}")
        still = await derived(engine, "kept", workspaces)
        [(_, notice)] = await SESSION_DELETED.read(engine, "gone")
        exported: list[Any] = []

        async def deletion_audited() -> bool:  # the audit worker takes facts in as they come
            audit = await EXPORT.call(engine, ExportRequest(session_id="gone"))
            exported[:] = [audit]
            return any(r["kind"] == "session_deleted" for r in audit.records)

        await wait_until(deletion_audited, message="the deletion in the audit log")
        audit = exported[0]
        report = await VERIFY.call(engine, VerifyRequest())

    growing = {"events", "traces"}  # late spans and events may still arrive for 'kept'
    assert all(still[k] >= kept[k] for k in growing), (still, kept)
    assert {k: v for k, v in still.items() if k not in growing} == {
        k: v for k, v in kept.items() if k not in growing
    }
    assert (notice.session_id, notice.requested_by) == ("gone", "alice")
    assert report.ok, report.problem
    [deleted] = [r for r in audit.records if r["kind"] == "session_deleted"]
    assert deleted["actor"] == "alice"
