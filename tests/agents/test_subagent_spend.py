"""A subagent's spend counts for its lead: in the lead run's usage (its cost) and on every budget
of the lead (its session, its agent, its user and tenant), transitively through a grandchild; and
a lead's session budget caps what its subagents may spend. On each engine backend."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tackroom.contracts.agents import AgentDefinition, child_ids
from tackroom.contracts.messages import AgentMessage, Usage, text_of
from tackroom.contracts.principal import Principal
from tackroom.harness.models import ModelChunk, ToolCall
from tackroom.testing import FunctionModel, ModelInfo
from tackroom.testing.backends import BACKENDS, engine_url_for

from .scenario import harness_for, results_by_call

pytestmark = pytest.mark.parametrize("backend", list(BACKENDS))

LEAD_COST, HELPER_COST, DEEP_COST = 0.001, 0.01, 0.1
BUDGETED = {
    "budget_check_function": "budget::check",
    "budget_record_function": "budget::record",
}


def respond(messages: list[AgentMessage], info: ModelInfo) -> str | list[ModelChunk]:
    """The lead asks the helper, which asks deep; each answer costs its agent's price."""
    results = results_by_call(messages)
    if "[agent:deep]" in info.system_prompt:
        return ["deep done", Usage(cost_usd=DEEP_COST)]
    if "[agent:helper]" in info.system_prompt:
        if "call-deep" not in results:
            return [
                ToolCall("agent__deep", {"task": "dig"}, id="call-deep"),
                Usage(cost_usd=HELPER_COST),
            ]
        return [
            "helper read: " + text_of(results["call-deep"].content),
            Usage(cost_usd=HELPER_COST),
        ]
    if "call-help" not in results:
        return [
            ToolCall("agent__helper", {"task": "help"}, id="call-help"),
            Usage(cost_usd=LEAD_COST),
        ]
    return ["lead read: " + text_of(results["call-help"].content), Usage(cost_usd=LEAD_COST)]


AGENTS = [
    AgentDefinition(name="helper", instructions="[agent:helper]", tools=["agent::deep"]),
    AgentDefinition(name="deep", instructions="[agent:deep]"),
]


async def _create(harness: Any, **request: Any) -> str:
    made = await harness.bus.trigger("budget::create", {"cap_usd": 10.0, **request}, timeout=5)
    budget_id: str = made["id"]
    return budget_id


async def _spent(harness: Any, budget_id: str) -> float:
    usage = await harness.bus.trigger("budget::usage", {"budget_id": budget_id}, timeout=5)
    spent: float = usage["current"]["spent_usd"]
    return spent


async def test_the_lead_pays_for_its_subagents(backend: str, tmp_path: Path) -> None:
    harness = harness_for(
        tmp_path,
        engine=engine_url_for(backend, tmp_path),
        model=FunctionModel(respond),
        agents=AGENTS,
        workers=["budget"],
        orchestrator={**BUDGETED, "budget_agent": "lead"},
    )
    harness.principal = Principal(id="alice", tenant="acme")
    async with harness:
        lead_session = await _create(harness, scope="session/lead")
        lead_agent = await _create(harness, agent="lead")
        helper_agent = await _create(harness, agent="helper", tenant="acme")
        alice = await _create(harness, tenant="acme", user="alice")
        acme = await _create(harness, tenant="acme")
        other = await _create(harness, tenant="other")
        helper_session, _ = child_ids("lead", "run-lead", "call-help", "helper")
        helper_budget = await _create(harness, scope=f"session/{helper_session}")
        result = await harness.run("go", session="lead", run_id="run-lead")
        spent = {b: await _spent(harness, b) for b in (lead_session, lead_agent, alice, acme)}
        helper_spent = await _spent(harness, helper_budget)
        helper_agent_spent = await _spent(harness, helper_agent)
        other_spent = await _spent(harness, other)
        helper_view = await harness.get_state(helper_session)
    assert result.ok, result.error
    assert result.output == "lead read: helper read: deep done"
    tree = 2 * LEAD_COST + 2 * HELPER_COST + DEEP_COST
    # The run's cost: its own two answers, the helper's two and deep's one.
    assert result.usage.cost_usd == pytest.approx(tree)
    assert helper_view is not None
    assert helper_view.usage.cost_usd == pytest.approx(2 * HELPER_COST + DEEP_COST)
    # Every budget of the lead counts the whole tree; the helper's, the helper and below.
    assert spent == {b: pytest.approx(tree) for b in spent}
    assert helper_spent == pytest.approx(2 * HELPER_COST + DEEP_COST)
    assert helper_agent_spent == pytest.approx(2 * HELPER_COST + DEEP_COST)
    assert other_spent == 0.0


async def test_the_leads_budget_caps_its_subagents(backend: str, tmp_path: Path) -> None:
    harness = harness_for(
        tmp_path,
        engine=engine_url_for(backend, tmp_path),
        model=FunctionModel(respond),
        agents=AGENTS,
        workers=["budget"],
        orchestrator=BUDGETED,
    )
    async with harness:
        # The lead's session may spend 0.015. The lead's first answer (0.001), the helper's
        # (0.01) and deep's (0.1, allowed while 0.011 was spent) are charged to it; then the
        # helper's second model call is refused, and so is the lead's.
        lead = await _create(harness, scope="session/lead", cap_usd=0.015, period="total")
        result = await harness.run("go", session="lead", run_id="run-lead")
        helper_session, _ = child_ids("lead", "run-lead", "call-help", "helper")
        helper_view = await harness.get_state(helper_session)
        spent = await _spent(harness, lead)
    assert helper_view is not None
    assert helper_view.stop_reason == "budget_exceeded"
    assert result.stop_reason == "budget_exceeded"
    helped = results_by_call(result.messages)["call-help"]
    assert helped.is_error
    assert helped.details["error"] == "budget_exceeded"
    assert spent == pytest.approx(LEAD_COST + HELPER_COST + DEEP_COST)
    assert result.usage.cost_usd == pytest.approx(LEAD_COST + HELPER_COST + DEEP_COST)
