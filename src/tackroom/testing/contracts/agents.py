"""The contract of an agents worker (``agent::<name>``, ``handoff::<name>``), by function id.

Any worker that replaces ``agents`` proves it fits by running this suite: subclass
:class:`AgentsContract`, name the worker and, if its config differs from the shipped worker's,
turn the suite's agent definitions into its config section (:meth:`AgentsContract.configure`)::

    class TestMyAgents(AgentsContract):
        worker_name = "my-agents"

        def configure(
            self, agents: list[dict[str, Any]], *, default_model: str | None, max_depth: int
        ) -> dict[str, Any]:
            return {"definitions": agents, "model": default_model, "depth": max_depth}

The agents are :class:`~tackroom.contracts.agents.AgentDefinition` records (:data:`AGENTS`).
The worker's collaborators are played by the suite on the bus (:class:`Collaborators`):
``run::start`` records each request and starts it (or refuses, when told to), and
``budget::create`` records each sub-budget. A call carries the orchestrator's call context
under ``_call`` as a run's turn does. Every check goes through ``engine.trigger`` only; a
deleted session arrives as a record on ``session-tree::deleted``.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import AsyncIterator
from typing import Any, ClassVar

import pytest

from tackroom.contracts.agents import child_ids
from tackroom.contracts.budget import Budget, CreateRequest
from tackroom.contracts.forgetting import SESSION_DELETED
from tackroom.contracts.messages import UserMessage, text_of
from tackroom.contracts.tools import CALL_CONTEXT_KEY
from tackroom.contracts.turn import RunStartRequest
from tackroom.engine import Engine
from tackroom.testing import wait_until
from tackroom.testing.contracts.base import CONTRACT_TIMEOUT, WorkerContract

__all__ = ["AGENTS", "AgentsContract", "Collaborators"]

VERDICT = {"type": "object", "properties": {"verdict": {"type": "string"}}, "required": ["verdict"]}

AGENTS: list[dict[str, Any]] = [
    {
        "name": "helper",
        "description": "Helps with anything.",
        "instructions": "[helper] Help.",
        "model": "scripted:helper-model",
        "tools": ["fs::read"],
        "max_turns": 3,
    },
    {
        "name": "judge",
        "instructions": "[judge] Judge.",
        "output_schema": VERDICT,
        "budget_usd": 0.5,
    },
]
"""``helper`` names its model; ``judge`` takes the default model, answers JSON valid against
:data:`VERDICT`, and has a sub-budget of 0.5 USD."""
DEFAULT_MODEL = "scripted:default-model"
MAX_DEPTH = 2


class Collaborators:
    """``run::start`` and ``budget::create`` as the agents worker meets them, and what they saw."""

    def __init__(self) -> None:
        self.starts: list[RunStartRequest] = []
        self.budgets: list[CreateRequest] = []
        self.refuse: str | None = None
        """Set: ``run::start`` refuses every start with this reason."""

    async def register(self, bus: Engine) -> None:
        await bus.register_function("run::start", self._start, worker="contract-test")
        await bus.register_function("budget::create", self._budget, worker="contract-test")

    async def _start(self, payload: Any) -> dict[str, Any]:
        request = RunStartRequest.model_validate(payload)
        self.starts.append(request)
        started = self.refuse is None
        return {
            "session_id": request.session_id,
            "started": started,
            "run_id": request.run_id if started else None,
            "reason": self.refuse,
        }

    async def _budget(self, payload: Any) -> Any:
        request = CreateRequest.model_validate(payload)
        self.budgets.append(request)
        now = time.time()
        return Budget(
            id=request.id or "b",
            scope=request.scope or "",
            period=request.period,
            cap_usd=request.cap_usd,
            alert_thresholds=request.alert_thresholds,
            created_at=now,
            updated_at=now,
        ).model_dump(mode="json")


def context(session: str, call: str, run: str | None = "run-lead", **extra: Any) -> dict[str, Any]:
    """The call context of a run's tool call."""
    return {"session_id": session, "function_call_id": call, "run_id": run, **extra}


class AgentsContract(WorkerContract):
    worker_name: ClassVar[str] = "agents"

    def configure(
        self, agents: list[dict[str, Any]], *, default_model: str | None, max_depth: int
    ) -> dict[str, Any]:
        """The worker's config section serving ``agents`` (:class:`AgentDefinition` records),
        with ``default_model`` for an agent that names none and subagents nesting at most
        ``max_depth`` deep."""
        return {"agents": agents, "default_model": default_model, "max_depth": max_depth}

    @pytest.fixture
    async def bus(self, engine_url: str) -> AsyncIterator[Engine]:
        config = self.configure(AGENTS, default_model=DEFAULT_MODEL, max_depth=MAX_DEPTH)
        async with self.hosted(engine_url, config) as engine:
            yield engine

    @pytest.fixture
    async def peers(self, bus: Engine) -> Collaborators:
        collaborators = Collaborators()
        await collaborators.register(bus)
        return collaborators

    # -- helpers -------------------------------------------------------------------------------
    async def ask(self, bus: Engine, agent: str, task: str, call: dict[str, Any]) -> Any:
        reply = await self.call(bus, f"agent::{agent}", {"task": task, CALL_CONTEXT_KEY: call})
        assert (reply["schema_version"], reply["agent"]) == (1, agent)
        return reply

    # -- subagents -----------------------------------------------------------------------------
    async def test_a_call_starts_the_agents_child_run(
        self, bus: Engine, peers: Collaborators
    ) -> None:
        alice = {"id": "alice", "roles": ["dev"], "tenant": "default"}
        reply = await self.ask(bus, "helper", "find x", context("lead", "c1", principal=alice))
        session, run = child_ids("lead", "run-lead", "c1", "helper")
        assert (reply["status"], reply["child_session_id"], reply["child_run_id"]) == (
            "running", session, run
        )  # fmt: skip
        (start,) = peers.starts
        assert (start.session_id, start.run_id, start.agent) == (session, run, "helper")
        assert (start.provider, start.model, start.max_turns) == ("scripted", "helper-model", 3)
        assert start.tools == ["fs::read"]
        assert start.principal is not None
        assert (start.principal.id, start.principal.roles) == ("alice", ("dev",))
        assert "[helper] Help." in (start.instructions or "")
        last = start.messages[-1]
        assert isinstance(last, UserMessage)
        assert text_of(last.content) == "find x"
        assert start.parent is not None
        parent = start.parent
        assert (parent.session_id, parent.run_id, parent.function_call_id) == (
            "lead", "run-lead", "c1"
        )  # fmt: skip
        assert (parent.agent, parent.depth, parent.output_schema) == ("helper", 1, None)
        assert peers.budgets == []

    async def test_a_call_names_the_same_child_every_time(
        self, bus: Engine, peers: Collaborators
    ) -> None:
        first = await self.ask(bus, "helper", "x", context("lead", "c1"))
        again = await self.ask(bus, "helper", "x", context("lead", "c1"))
        other = await self.ask(bus, "helper", "x", context("lead", "c2"))
        assert first == again
        assert other["child_session_id"] != first["child_session_id"]
        assert [(s.session_id, s.run_id) for s in peers.starts[:2]] == [
            (first["child_session_id"], first["child_run_id"])
        ] * 2
        tenanted = await self.ask(bus, "helper", "x", context("acme:lead", "c1"))
        assert tenanted["child_session_id"].startswith("acme:")
        assert tenanted["child_session_id"] == child_ids("acme:lead", "run-lead", "c1", "helper")[0]

    async def test_default_model_output_schema_and_sub_budget(
        self, bus: Engine, peers: Collaborators
    ) -> None:
        reply = await self.ask(bus, "judge", "judge it", context("lead", "c1"))
        (start,) = peers.starts
        assert (start.provider, start.model) == ("scripted", "default-model")
        instructions = start.instructions or ""
        assert "[judge] Judge." in instructions
        assert "verdict" in instructions  # the schema is given to the model
        assert start.parent is not None
        assert start.parent.output_schema == VERDICT
        (budget,) = peers.budgets
        assert (budget.scope, budget.period, budget.cap_usd) == (
            f"session/{reply['child_session_id']}", "total", 0.5
        )  # fmt: skip

    async def test_nesting_deeper_than_the_limit_is_refused(
        self, bus: Engine, peers: Collaborators
    ) -> None:
        child = (await self.ask(bus, "helper", "x", context("lead", "c1")))["child_session_id"]
        grandchild = await self.ask(bus, "helper", "y", context(child, "c2", run="run-child"))
        assert grandchild["status"] == "running"
        assert [s.parent.depth for s in peers.starts if s.parent] == [1, 2]
        deeper = context(grandchild["child_session_id"], "c3", run="run-grandchild")
        refused = await self.ask(bus, "helper", "z", deeper)
        assert refused["status"] == "refused"
        assert refused["reason"]
        assert refused.get("child_session_id") is None
        assert len(peers.starts) == 2

    async def test_a_start_refused_is_a_refused_call(
        self, bus: Engine, peers: Collaborators
    ) -> None:
        peers.refuse = "the session is busy"
        reply = await self.ask(bus, "helper", "x", context("lead", "c1"))
        assert (reply["status"], reply["reason"]) == ("refused", "the session is busy")

    async def test_a_deleted_sessions_link_is_forgotten(
        self, bus: Engine, peers: Collaborators
    ) -> None:
        child = (await self.ask(bus, "helper", "x", context("lead", "c1")))["child_session_id"]
        await self.ask(bus, "helper", "y", context(child, "c2"))
        assert peers.starts[-1].parent is not None
        assert peers.starts[-1].parent.depth == 2
        deleted = {"schema_version": 1, "session_id": child, "at": time.time()}
        await bus.append(SESSION_DELETED.name, child, deleted)
        calls = itertools.count(3)

        async def forgotten() -> bool:  # a call from it is a top-level run's again
            await self.ask(bus, "helper", "y", context(child, f"c{next(calls)}"))
            parent = peers.starts[-1].parent
            return parent is not None and parent.depth == 1

        await wait_until(forgotten, timeout=CONTRACT_TIMEOUT, message="the link forgotten")

    # -- handoffs ------------------------------------------------------------------------------
    async def test_a_handoff_names_the_agent_taking_over(
        self, bus: Engine, peers: Collaborators
    ) -> None:
        call = {CALL_CONTEXT_KEY: context("lead", "c1")}
        reply = await self.call(bus, "handoff::helper", {"reason": "it knows", **call})
        assert reply["details"]["handoff"] == {
            "schema_version": 1,
            "agent": "helper",
            "provider": "scripted",
            "model": "helper-model",
            "instructions": "[helper] Help.",
            "tools": ["fs::read"],
        }
        assert [block["type"] for block in reply["content"]] == ["text"]
        assert "helper" in reply["content"][0]["text"]
        judge = (await self.call(bus, "handoff::judge", {}))["details"]["handoff"]
        assert (judge["agent"], judge["provider"], judge["model"]) == (
            "judge", "scripted", "default-model"
        )  # fmt: skip
        assert "[judge] Judge." in judge["instructions"]
        assert "verdict" in judge["instructions"]
        assert (peers.starts, peers.budgets) == ([], [])

    # -- refusals ------------------------------------------------------------------------------
    async def test_bad_calls_are_typed_errors(self, bus: Engine, peers: Collaborators) -> None:
        call = {CALL_CONTEXT_KEY: context("lead", "c1")}
        for bad in (
            {**call},
            {"task": "", **call},
            {"task": 5, **call},
            {"task": "x", "surprise": 1, **call},
            {"task": "x"},
            {"task": "x", CALL_CONTEXT_KEY: context("lead", "c1", run=None)},
        ):
            assert await self.code_of(bus, "agent::helper", bad) == "invalid_request", bad
        for handoff in ({"reason": 5}, {"surprise": 1}, {"reason": "x" * 2001}):
            code = await self.code_of(bus, "handoff::helper", handoff)
            assert code == "invalid_request", handoff
        assert peers.starts == []

    async def test_an_agent_without_a_model_is_a_config_error(self, engine_url: str) -> None:
        config = self.configure(AGENTS, default_model=None, max_depth=MAX_DEPTH)
        async with self.hosted(engine_url, config) as bus:
            peers = Collaborators()
            await peers.register(bus)
            call = {"task": "x", CALL_CONTEXT_KEY: context("lead", "c1")}
            assert await self.code_of(bus, "agent::judge", call) == "invalid_config"
            assert await self.code_of(bus, "handoff::judge", {}) == "invalid_config"
            assert peers.starts == []
            assert (await self.ask(bus, "helper", "x", context("lead", "c2")))["status"] == (
                "running"
            )
