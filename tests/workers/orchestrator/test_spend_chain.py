"""What the orchestrator charges a model call to: the run's principal's tenant and user, the run's
agent (``budget_agent`` when it names none), and a child run's leads, read from its parent's turn
record when it starts."""

from __future__ import annotations

from tackroom.contracts.agents import ParentLink
from tackroom.contracts.budget import CheckRequest, Lead
from tackroom.contracts.principal import Principal
from tackroom.testing import memory_engine
from tackroom.workers.orchestrator.record import TURNS_SCOPE, TurnRecord
from tackroom.workers.orchestrator.spend import BudgetGuard, leads_of


def _record(session: str, run: str, **fields: object) -> TurnRecord:
    return TurnRecord.model_validate(
        {"session_id": session, "run_id": run, "provider": "p", "model": "m", **fields}
    )


async def test_the_chain_names_the_principal_the_agent_and_the_leads() -> None:
    async with memory_engine() as engine:
        guard = BudgetGuard(
            engine,
            check_function="budget::check",
            record_function=None,
            workspace="ws",
            agent="main",
        )
        child = _record(
            "child",
            "run-c",
            agent="helper",
            principal={"id": "alice", "tenant": "acme"},
            leads=[{"session_id": "lead"}, {"session_id": "top", "agent": "planner"}],
        )
        chain = CheckRequest(**guard.chain(child), estimate_usd=0).chain()
        assert chain == [
            "session/child",
            "session/lead",
            "session/top",
            "agent/helper",
            "agent/main",  # the lead names no agent: the harness's
            "agent/planner",
            "workspace/ws",
            "user/acme~alice",
            "tenant/acme",
        ]
        bare = CheckRequest(**guard.chain(_record("s", "r")), estimate_usd=0).chain()
        assert bare == ["session/s", "agent/main", "workspace/ws"]


async def test_a_childs_leads_are_its_parent_then_the_parents_leads() -> None:
    link = ParentLink(
        session_id="lead", run_id="run-l", function_call_id="c1", agent="helper", depth=2
    )
    async with memory_engine() as engine:
        assert await leads_of(engine, link) == [Lead(session_id="lead")]  # no record: its session
        parent = _record(
            "lead",
            "run-l",
            agent="planner",
            principal=Principal(id="alice").model_dump(),
            leads=[{"session_id": "top"}],
        )
        await engine.set_state(TURNS_SCOPE, "lead", parent.model_dump(mode="json"))
        assert await leads_of(engine, link) == [
            Lead(session_id="lead", agent="planner"),
            Lead(session_id="top"),
        ]
        other_run = link.model_copy(update={"run_id": "run-other"})
        assert await leads_of(engine, other_run) == [Lead(session_id="lead")]
