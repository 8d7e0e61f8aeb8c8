"""Each policy worker says what a call its rules fail to decide gets: ``on_error: deny`` (the
default: fail closed) or ``allow`` (fail open), with ``rule_id: builtin:on_error`` and the
reason, which the gate's ``gate_decision`` (and so the audit log) keeps."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from tackroom.contracts.policy import ON_ERROR_RULE_ID, PROTECTED_RULE_ID
from tackroom.engine import Engine, open_engine
from tackroom.runtime import HarnessConfig, Host, load_worker
from tackroom.runtime.errors import ConfigError
from tackroom.testing import MEMORY_URL

CHECK = "policy::check_permissions"
FORBID_ETC = (
    '@id("no-etc")\nforbid (principal, action, resource == Function::"fs::read")\n'
    'when { context.args.path like "/etc/*" };\n'
    'permit (principal, action == Action::"call", resource in Namespace::"fs");\n'
)


@asynccontextmanager
async def serve(name: str, **config: Any) -> AsyncIterator[Engine]:
    harness = HarnessConfig(
        schema_version=1, worker_config={name: {"reload_interval": 0, **config}}
    )
    async with Host(
        engine=open_engine(MEMORY_URL), workers=[load_worker(name)], config=harness
    ) as host:
        yield host.engine


async def check(bus: Engine, function_id: str, args: dict[str, Any]) -> dict[str, Any]:
    reply: dict[str, Any] = await bus.trigger(CHECK, {"function_id": function_id, "args": args})
    return reply


def _failing(*args: Any, **kwargs: Any) -> Any:
    raise RecursionError("maximum recursion depth exceeded")


@pytest.mark.parametrize(("on_error", "decision"), [(None, "deny"), ("allow", "allow")])
async def test_rules_that_fail_on_a_call_follow_on_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, on_error: str | None, decision: str
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("tackroom.workers.policy.worker.evaluate", _failing)
    config = {} if on_error is None else {"on_error": on_error}
    async with serve("policy", **config) as bus:
        reply = await check(bus, "web::get", {"url": "https://example.org"})
        protected = await check(bus, "approval::resolve", {})
    assert (reply["decision"], reply["rule_id"]) == (decision, ON_ERROR_RULE_ID)
    assert "RecursionError: maximum recursion depth exceeded" in reply["reason"]
    assert ("fails open" in reply["reason"]) is (decision == "allow")
    assert protected["decision"] == "deny"  # a protected function never fails open


@pytest.mark.parametrize(("on_error", "decision"), [(None, "deny"), ("allow", "allow")])
async def test_a_cedar_policy_in_error_follows_on_error(
    tmp_path: Path, on_error: str | None, decision: str
) -> None:
    policies = tmp_path / "policies.cedar"
    policies.write_text(FORBID_ETC, encoding="utf-8")
    config = {"policies_path": str(policies)}
    if on_error is not None:
        config["on_error"] = on_error
    async with serve("policy-cedar", **config) as bus:
        broken = await check(bus, "fs::read", {"path": 5})  # `like` on a number: an error
        fine = await check(bus, "fs::read", {"path": "/etc/passwd"})
        protected = await check(bus, "approval::resolve", {})
    assert broken["decision"] == decision
    assert "could not be evaluated" in broken["reason"]
    assert "no-etc" in broken["reason"]
    if decision == "allow":
        assert broken["rule_id"] == ON_ERROR_RULE_ID
        assert "fails open (on_error: allow)" in broken["reason"]
    assert (fine["decision"], fine["rule_id"]) == ("deny", "no-etc")  # rules that work decide
    assert (protected["decision"], protected["rule_id"]) == ("deny", PROTECTED_RULE_ID)


async def test_a_bad_on_error_is_refused_at_start_in_one_line() -> None:
    with pytest.raises(ConfigError) as refused:
        async with serve("policy", on_error="maybe"):
            pass
    assert str(refused.value) == (
        "<config>: worker_config.policy.on_error: Input should be 'deny' or 'allow'"
    )
