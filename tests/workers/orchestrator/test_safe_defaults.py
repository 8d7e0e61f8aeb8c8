"""Out of the box the gate is on: reads run, writes ask, plan and ask mode only look, a tool's
required permission is checked against the run's principal, and every decision names who the run
acts for."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tackroom.contracts.events import AgentEvent, GateDecided
from tackroom.contracts.messages import FunctionResultMessage, text_of
from tackroom.contracts.principal import Principal
from tackroom.contracts.turn import Mode
from tackroom.harness import Harness, RunResult

WRITE = {"function_id": "fs::write", "arguments": {"path": "a.txt", "content": "hi"}, "id": "w1"}
READ = {"function_id": "fs::list", "arguments": {}, "id": "r1"}


def _script(*calls: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"tool_calls": list(calls)}, {"text": "done"}]


async def _run(
    tmp_path: Path, script: list[dict[str, Any]], **options: Any
) -> tuple[RunResult[Any], list[AgentEvent]]:
    harness = Harness(
        "scripted:demo", home=tmp_path / "home", script=script, tools=["fs::*"], **options
    )
    async with harness:
        stream = harness.stream("go", session="s1")
        events = [event async for event in stream if not stream.parked]
        return stream.result, events


def _gate(events: list[AgentEvent]) -> dict[str, GateDecided]:
    return {e.data.function_id: e for e in events if isinstance(e, GateDecided)}


def _result(result: RunResult[Any], call_id: str) -> FunctionResultMessage:
    [found] = [
        m
        for m in result.messages
        if isinstance(m, FunctionResultMessage) and m.function_call_id == call_id
    ]
    return found


async def test_out_of_the_box_a_read_runs_and_a_write_asks(tmp_path: Path) -> None:
    harness = Harness(
        "scripted:demo",
        home=tmp_path / "home",
        script=_script(READ, WRITE),
        tools=["fs::*"],
        principal="alice",
    )
    async with harness:
        result = await harness.run("go", session="s1")
        assert [p.function_id for p in result.pending] == ["fs::write"]
        assert not (tmp_path / "home" / "workspaces" / "s1" / "a.txt").exists()
        await harness.approvals.deny(result.pending[0], reason="not now")
        result = await harness.wait(result)
    assert result.output == "done"
    assert "not now" in text_of(_result(result, "w1").content)
    assert _result(result, "r1").is_error is False


async def test_auto_approve_runs_the_write_and_names_the_principal(tmp_path: Path) -> None:
    result, events = await _run(
        tmp_path, _script(WRITE), auto_approve=True, principal=Principal(id="alice")
    )
    assert result.output == "done"
    assert not result.pending
    assert (tmp_path / "home" / "workspaces" / "s1" / "a.txt").read_text() == "hi"
    decided = _gate(events)["fs::write"].data
    assert (decided.decision, decided.decided_by) == ("allow", "approval_mode")
    assert decided.principal == "alice"


@pytest.mark.parametrize("mode", ["plan", "ask"])
async def test_a_looking_mode_refuses_a_write_even_with_auto_approve(
    tmp_path: Path, mode: Mode
) -> None:
    result, events = await _run(tmp_path, _script(READ, WRITE), mode=mode, auto_approve=True)
    assert result.output == "done"
    assert not result.pending
    assert not (tmp_path / "home" / "workspaces" / "s1" / "a.txt").exists()
    gate = _gate(events)
    assert gate["fs::write"].data.decided_by == "mode"
    assert gate["fs::write"].data.decision == "deny"
    assert f"{mode} mode" in text_of(_result(result, "w1").content)
    assert gate["fs::list"].data.decision == "allow"


async def test_plan_mode_holds_without_any_policy(tmp_path: Path) -> None:
    """A thin harness (no policy, no approvals) still refuses side effects in plan mode."""
    from tackroom.runtime.config import HarnessConfig

    config = HarnessConfig.defaults()
    workers = [w for w in config.agent.workers if w not in ("policy", "approvals")]
    config = config.model_copy(
        update={"agent": config.agent.model_copy(update={"workers": workers})}
    )
    result, events = await _run(tmp_path, _script(WRITE), mode="plan", config=config)
    assert result.output == "done"
    assert _gate(events)["fs::write"].data.decided_by == "mode"
    assert not (tmp_path / "home" / "workspaces" / "s1" / "a.txt").exists()


def deploy() -> str:
    """Deploy the thing."""
    return "deployed"


@pytest.mark.parametrize(
    ("principal", "runs"),
    [
        (None, False),
        (Principal(id="bob"), False),
        (Principal(id="bob", roles=("viewer",)), False),
        (Principal(id="carol", roles=("deployer",)), True),
    ],
)
async def test_a_required_permission_is_checked_against_the_principal(
    tmp_path: Path, principal: Principal | None, runs: bool
) -> None:
    call = {"name": "deploy", "arguments": {}, "id": "d1"}
    harness = Harness(
        "scripted:demo",
        home=tmp_path / "home",
        script=_script(call),
        principal=principal,
        auto_approve=True,
    )
    harness.tool(required_permission="deployer")(deploy)
    async with harness:
        stream = harness.stream("deploy", session="s1")
        events = [event async for event in stream]
        result = stream.result
    decided = _gate(events)["tool::deploy"].data
    assert decided.decision == ("allow" if runs else "deny")
    answer = _result(result, "d1")
    if runs:
        assert "deployed" in text_of(answer.content)
    else:
        assert decided.decided_by == "permission"
        assert "deployer" in text_of(answer.content)


@pytest.mark.parametrize(
    ("idempotent", "error", "code", "calls"),
    [
        (True, ConnectionError("reset"), "connection_failed", 2),  # transient: one retry (seed)
        (False, ConnectionError("reset"), "connection_failed", 1),  # never: it may have acted
        (True, ValueError("bad"), "tool_error", 1),  # not transient
    ],
)
async def test_only_an_idempotent_tool_is_retried_and_only_on_a_transient_error(
    tmp_path: Path, idempotent: bool, error: Exception, code: str, calls: int
) -> None:
    seen: list[int] = []

    def flaky() -> str:
        """Fails every time."""
        seen.append(1)
        raise error

    call = {"name": "flaky", "arguments": {}, "id": "f1"}
    harness = Harness("scripted:demo", home=tmp_path / "home", script=_script(call))
    harness.tool(idempotent=idempotent)(flaky)
    async with harness:
        result = await harness.run("go", session="s1")
    assert len(seen) == calls
    failed = _result(result, "f1")
    assert failed.is_error
    assert failed.details["error"] == code
    assert failed.details.get("attempts", 1) == calls


async def test_an_idempotent_tool_that_recovers_answers_the_model(tmp_path: Path) -> None:
    seen: list[int] = []

    def recovers() -> str:
        """Fails once, then answers."""
        seen.append(1)
        if len(seen) == 1:
            raise TimeoutError("slow upstream")
        return "fine"

    call = {"name": "recovers", "arguments": {}, "id": "r1"}
    harness = Harness("scripted:demo", home=tmp_path / "home", script=_script(call))
    harness.tool(idempotent=True)(recovers)
    async with harness:
        result = await harness.run("go", session="s1")
    assert len(seen) == 2
    answer = _result(result, "r1")
    assert not answer.is_error
    assert "fine" in text_of(answer.content)
