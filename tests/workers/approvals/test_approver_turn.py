"""A real scripted turn whose call a policy rule guards with approvers: the run's own principal,
a viewer and another tenant's admin are refused, one admin's allow keeps it parked, a second
admin's runs it — each step in the audit trail. On both engine backends."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tackroom.contracts import approvals as c
from tackroom.contracts.audit import EXPORT, ExportRequest
from tackroom.contracts.policy import CHECK_PERMISSIONS
from tackroom.contracts.principal import Principal
from tackroom.engine import Engine, InvocationError
from tackroom.harness import Harness
from tackroom.runtime.config import HarnessConfig
from tackroom.testing import wait_until
from tackroom.testing.backends import BACKENDS, engine_url_for

RULES = """\
schema_version: 1
rules:
  - id: guarded-writes
    function: fs::write
    decision: needs_approval
    reason: writes need two admins
    approvers:
      roles: [admin]
      four_eyes: true
      quorum: 2
"""
WRITE = {"function_id": "fs::write", "arguments": {"path": "a.txt", "content": "hi"}, "id": "w1"}
ALICE = Principal(id="alice", roles=("admin",), tenant="acme")


def as_(user: str, *roles: str, tenant: str = "acme") -> Principal:
    return Principal(id=user, roles=roles, tenant=tenant, method="oidc")


async def resolve(engine: Engine, who: Principal, session: str = "s1") -> c.DecisionRecord:
    request = c.ResolveRequest(
        session_id=session, function_call_id="w1", decision="allow", principal=who
    )
    return await c.RESOLVE.call(engine, request)


async def refusal(engine: Engine, who: Principal) -> str:
    with pytest.raises(InvocationError) as caught:
        await resolve(engine, who)
    return caught.value.remote_code


async def audited(engine: Engine, kinds: set[str]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []

    async def recorded() -> bool:
        found[:] = (await EXPORT.call(engine, ExportRequest(session_id="s1"))).records
        return kinds <= {record["kind"] for record in found}

    await wait_until(recorded, message=lambda: f"{kinds} in {[r['kind'] for r in found]}")
    return found


@pytest.mark.parametrize("backend", list(BACKENDS))
async def test_a_parked_call_runs_once_two_admins_other_than_the_requester_allow(
    tmp_path: Path, backend: str
) -> None:
    rules = tmp_path / "permissions.yaml"
    rules.write_text(RULES)
    config = HarnessConfig.defaults().model_copy(
        update={
            "worker_config": {
                "policy": {"rules_path": str(rules), "reload_interval": 0},
                "orchestrator": {"policy_function": CHECK_PERMISSIONS.id},
            }
        }
    )
    home = tmp_path / "home"
    harness = Harness(
        "scripted:demo",
        config=config,
        home=home,
        engine=engine_url_for(backend, tmp_path),
        script=[{"tool_calls": [WRITE]}, {"text": "done"}],
        tools=["fs::*"],
        principal=ALICE,
        auto_approve=True,  # the session's mode allows everything — but not past approver rules
    )
    written = home / "workspaces" / "s1" / "a.txt"
    async with harness:
        engine = harness.engine
        result = await harness.run("go", session="s1")
        [pending] = result.pending
        assert pending.function_id == "fs::write"
        got = await c.GET.call(engine, c.GetRequest(session_id="s1", function_call_id="w1"))
        assert got.pending is not None
        assert got.pending.approvers is not None
        assert (got.pending.approvers.roles, got.pending.approvers.quorum) == (("admin",), 2)
        assert got.pending.requester == ALICE

        with pytest.raises(InvocationError) as own:  # the harness approves as alice herself
            await harness.approvals.approve(pending)
        assert own.value.remote_code == c.APPROVER_NOT_ALLOWED_ERROR
        assert "four eyes" in own.value.message
        assert await refusal(engine, as_("bob", "viewer")) == c.APPROVER_NOT_ALLOWED_ERROR
        assert await refusal(engine, as_("mallory", "admin", tenant="globex")) == (
            c.NOT_PENDING_ERROR
        )

        first = await resolve(engine, as_("carol", "admin"))
        assert (first.status, first.approvals_so_far, first.needed) == ("pending", 1, 2)
        again = await resolve(engine, as_("carol", "admin"))
        assert (again.status, again.approvals_so_far) == ("pending", 1)
        view = await harness.get_state("s1")
        assert view is not None
        assert view.state == "function_awaiting_approval"
        assert not written.exists()

        final = await resolve(engine, as_("dave", "admin"))
        assert (final.status, final.decision, final.approvals_so_far) == ("decided", "allow", 2)
        result = await harness.wait(result)
        assert result.output == "done"
        assert written.read_text() == "hi"

        found = await audited(engine, {"approval_refused", "approval_vote", "approval_resolved"})
    refused = [r for r in found if r["kind"] == "approval_refused"]
    assert sorted(r["actor"] for r in refused) == ["alice", "bob", "mallory"]
    assert {r["fact"]["error"] for r in refused} == {"approver_not_allowed", "not_pending"}
    [vote] = [r for r in found if r["kind"] == "approval_vote"]
    assert (vote["actor"], vote["fact"]["approvals_so_far"], vote["fact"]["needed"]) == (
        "carol",
        1,
        2,
    )
    [resolved] = [r for r in found if r["kind"] == "approval_resolved"]
    assert resolved["actor"] == "dave"
    assert resolved["fact"]["approver_principal"]["id"] == "dave"
    assert resolved["fact"]["approver_principal"]["tenant"] == "acme"
    assert all(r["principal"]["id"] == "alice" for r in [*refused, vote, resolved])
