"""The contract of an orchestrator (``run::start``, ``run::abort``, ``turn::get_state``), by
function id, and of what its runs publish on ``agent::events``.

An orchestrator does nothing alone: each test boots the worker under test beside the shipped
workers :meth:`~OrchestratorContract.collaborators` names (``engine``, ``sessions``, ``policy``),
a :class:`~tackroom.testing.ScriptedProvider` named ``scripted`` with a sequence of turns for
each test's session, and the test tools ``contract::echo``, ``contract::wait`` (it blocks until
the test releases it) and ``contract::forbidden`` (the policy denies it), all in
:mod:`.orchestra`. Runs are offered ``contract::*``. What it must do, as the gateway, the
console and the harness rely on it:

- ``run::start`` ensures the session before it answers, runs the turn (model, tools, model…)
  and appends its messages to the session (``session-tree::*``) in order: the user's message,
  each answer, each function result. A start repeated with the run id of the session's current
  or last run starts nothing (``started`` and ``resumed``); another start while a run is in
  flight is refused (``reason`` starting ``session_busy``);
- ``turn::get_state`` shows the run (``null`` for a session without one): its state as it goes
  (``function_execute`` while a tool runs), then ``stopped`` with its ``stop_reason``;
- ``run::abort`` ends a run in flight ``stopped`` with ``stop_reason: "aborted"`` (here while a
  tool blocks: the run ends once the tool returns, without another model call);
- every tool call passes ``policy::check_permissions``: an allowed tool is called once with the
  model's arguments and the call context (``_call``: session, run, call id), a denied one is not
  called, and both results reach the model's next request;
- the run is told on ``agent::events`` (group = session) as typed events
  (:data:`tackroom.contracts.events.EVENTS`), stored as it goes. There is no ``agent_start``: a
  run opens with a ``turn_state_changed`` from ``provisioning``, each one going on from the state
  the previous one reached; every answer is a ``message_complete``, every call run a
  ``function_execution_start`` then ``_end``, every gate decision a ``gate_decision``, every
  model turn a ``turn_end`` (also on ``agent::turn_end``, which a compactor wakes on); it closes
  with one ``agent_end``. No live-only event (``message_update``, ``message_snapshot``) is stored;
- bad requests fail with ``invalid_request``.

A replacement subclasses :class:`OrchestratorContract` and names itself (``worker``,
``worker_name`` or ``worker_command``); its hooks, documented below, are
:meth:`~OrchestratorContract.worker_config` (its config section),
:meth:`~OrchestratorContract.collaborators` and :meth:`~OrchestratorContract.collaborator_config`.
``tests/contract/`` runs it on the shipped ``orchestrator`` and on ``minimal_orchestrator.py``, a
replacement written for the tests.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, ClassVar

import pytest

from tackroom.contracts.events import EVENTS, TURN_END
from tackroom.contracts.messages import FunctionResultMessage
from tackroom.engine.protocol import Engine
from tackroom.runtime.worker import WorkerSpec
from tackroom.testing.contracts.base import CONTRACT_TIMEOUT, WorkerContract
from tackroom.testing.contracts.orchestra import (
    ECHO,
    MODEL,
    POLICY_RULES,
    PROVIDER,
    SCRIPT,
    TOOLS,
    WAIT,
    ContractTools,
    text_of,
    told_in_order,
)
from tackroom.testing.scripted import Script, ScriptedProvider
from tackroom.testing.waiting import wait_until

__all__ = ["OrchestratorContract"]

TOOL_TURN = ["user", "assistant", "function_result", "assistant"]
"""The roles of a session after a run whose model called tools once, then answered."""


class OrchestratorContract(WorkerContract):
    worker_name: ClassVar[str] = "orchestrator"

    # -- hooks ---------------------------------------------------------------------------------
    def worker_config(self, directory: Path) -> dict[str, Any]:
        """The config section of the orchestrator under test, for a test whose files go under
        ``directory``: it must gate every tool call through ``policy::check_permissions`` (and
        ask no person: nothing here approves)."""
        return {
            "policy_function": "policy::check_permissions",
            "approvals_function": None,
            "cwd": str(directory),
        }

    def collaborators(self) -> list[str | WorkerSpec[Any]]:
        """The workers booted beside it (names :func:`~tackroom.runtime.load_worker` finds, or
        specs); the scripted provider and the test tools are always booted too."""
        return ["engine", "sessions", "policy"]

    def collaborator_config(self, directory: Path) -> dict[str, dict[str, Any]]:
        """The collaborators' config sections: the policy's rules (:data:`POLICY_RULES`)."""
        rules = directory / "contract-policy.yaml"
        rules.write_text(POLICY_RULES, encoding="utf-8")
        return {"policy": {"rules_path": str(rules), "default_decision": "deny"}}

    # -- fixtures ------------------------------------------------------------------------------
    @pytest.fixture
    def tools(self) -> ContractTools:
        return ContractTools()

    @pytest.fixture
    def model(self) -> ScriptedProvider:
        return ScriptedProvider(Script(SCRIPT), name=PROVIDER)

    @asynccontextmanager
    async def orchestra(
        self, engine_url: str, directory: Path, *, tools: ContractTools, model: ScriptedProvider
    ) -> AsyncIterator[Engine]:
        """A started engine serving the orchestrator under test (in this process, or its
        ``worker_command``), its collaborators, ``model`` and ``tools``."""
        beside = [*self.collaborators(), model.worker_spec(), tools.worker_spec()]
        async with self.hosted(
            engine_url,
            self.worker_config(directory),
            beside=beside,
            beside_config=self.collaborator_config(directory),
        ) as engine:
            try:
                yield engine
            finally:
                tools.release.set()  # a test that failed while a call blocks must not hang

    @pytest.fixture
    async def bus(
        self, engine_url: str, tmp_path: Path, tools: ContractTools, model: ScriptedProvider
    ) -> AsyncIterator[Engine]:
        async with self.orchestra(engine_url, tmp_path, tools=tools, model=model) as engine:
            yield engine

    # -- helpers -------------------------------------------------------------------------------
    async def start(
        self, bus: Engine, session: str, run_id: str | None, text: str = "go", **extra: Any
    ) -> dict[str, Any]:
        payload = {
            "session_id": session,
            "provider": PROVIDER,
            "model": MODEL,
            "messages": [{"role": "user", "content": [{"type": "text", "text": text}]}],
            "tools": TOOLS,
            **extra,
        }
        if run_id is not None:
            payload["run_id"] = run_id
        reply: dict[str, Any] = await self.call(bus, "run::start", payload)
        return reply

    async def state(self, bus: Engine, session: str) -> dict[str, Any] | None:
        request = {"session_id": session}
        view: dict[str, Any] | None = await self.call(bus, "turn::get_state", request)
        return view

    async def frames(self, bus: Engine, session: str, run_id: str | None = None) -> list[Any]:
        """The session's stored events (of ``run_id``), each validated as a typed event."""
        records = await bus.read(EVENTS.name, session, limit=10_000)
        for record in records:
            EVENTS.parse(record.data)
        return [r.data for r in records if run_id is None or r.data["run_id"] == run_id]

    async def finished(self, bus: Engine, session: str, run_id: str) -> dict[str, Any]:
        """The run's state once it is over: ``stopped``/``failed`` and its ``agent_end`` told."""
        seen: list[Any] = [None]

        async def over() -> bool:
            seen[0] = view = await self.state(bus, session)
            if view is None or view["run_id"] != run_id:
                return False
            ends = [f for f in await self.frames(bus, session, run_id) if f["type"] == "agent_end"]
            return view["state"] in ("stopped", "failed") and bool(ends)

        await wait_until(over, timeout=CONTRACT_TIMEOUT, message=lambda: f"{run_id} ends: {seen}")
        view: dict[str, Any] = seen[0]
        return view

    async def path(self, bus: Engine, session: str) -> list[dict[str, Any]]:
        """The session's active path: ``[{entry_id, type, message}]``, oldest first."""
        reply = await self.call(bus, "session-tree::messages", {"session_id": session})
        messages: list[dict[str, Any]] = reply["messages"]
        return messages

    @staticmethod
    def roles(path: list[dict[str, Any]]) -> list[str]:
        return [entry["message"]["role"] for entry in path]

    # -- run::start ----------------------------------------------------------------------------
    async def test_a_scripted_turn_completes_and_its_answer_joins_the_session(
        self, bus: Engine, model: ScriptedProvider
    ) -> None:
        reply = await self.start(bus, "hello", "run-hello", "Say hello")
        assert (reply["session_id"], reply["run_id"]) == ("hello", "run-hello")
        assert reply["started"] is True
        assert not reply.get("queued")
        assert not reply.get("resumed")
        # The session exists once the start is answered: a client follows its events at once.
        info = await self.call(bus, "session-tree::get", {"session_id": "hello"})
        assert info["session_id"] == "hello"
        view = await self.finished(bus, "hello", "run-hello")
        assert (view["state"], view["stop_reason"], view["turn_count"]) == ("stopped", "end", 1)
        assert view["error"] is None
        path = await self.path(bus, "hello")
        assert self.roles(path) == ["user", "assistant"]
        assert [text_of(e["message"]) for e in path] == ["Say hello", SCRIPT[0]["text"]]
        [request] = model.requests
        assert request.model == MODEL
        assert text_of(request.messages[-1]) == "Say hello"
        frames = await self.frames(bus, "hello")
        types = told_in_order(frames, "hello", "run-hello")
        [answer] = [f["data"] for f in frames if f["type"] == "message_complete"]
        assert answer["message"]["role"] == "assistant"
        assert text_of(answer["message"]) == SCRIPT[0]["text"]
        assert types.index("message_complete") < types.index("turn_end") < len(types) - 1
        end = frames[-1]["data"]
        assert (end["state"], end["stop_reason"]) == ("stopped", "end")

    async def test_the_run_is_told_on_agent_events_in_order(
        self, bus: Engine, tools: ContractTools
    ) -> None:
        await self.start(bus, "events", "run-ev")
        await self.finished(bus, "events", "run-ev")
        frames = await self.frames(bus, "events")
        types = told_in_order(frames, "events", "run-ev")
        completes = [i for i, t in enumerate(types) if t == "message_complete"]
        assert len(completes) == 2, types
        start, end = types.index("function_execution_start"), types.index("function_execution_end")
        assert completes[0] < start < end < completes[1] < len(types) - 1, types
        asked = frames[completes[0]]["data"]["message"]
        [block] = [b for b in asked["content"] if b["type"] == "function_call"]
        assert (block["id"], block["arguments"]) == ("c-echo", {"text": "ping"})
        started, ended = frames[start]["data"], frames[end]["data"]
        assert (started["function_call_id"], started["function_id"]) == ("c-echo", ECHO)
        assert started["arguments"] == {"text": "ping"}
        assert (ended["function_call_id"], ended["function_id"]) == ("c-echo", ECHO)
        assert ended["is_error"] is False
        assert "PING" in text_of(ended["result"])
        assert text_of(frames[completes[1]]["data"]["message"]) == "The echo said PING."
        turn_ends = [f for f in frames if f["type"] == "turn_end"]
        assert len(turn_ends) == 2, "one turn_end per model turn"
        assert [r.data for r in await bus.read(TURN_END.name, "events")] == turn_ends
        path = await self.path(bus, "events")
        assert self.roles(path) == TOOL_TURN
        assert path[2]["message"]["function_call_id"] == "c-echo"
        assert len(tools.of(ECHO)) == 1

    # -- turn::get_state -----------------------------------------------------------------------
    async def test_the_turn_state_shows_the_run_as_it_goes(
        self, bus: Engine, tools: ContractTools
    ) -> None:
        assert await self.state(bus, "state") is None
        await self.start(bus, "state", "run-st", max_turns=5)
        await asyncio.wait_for(tools.waiting.wait(), CONTRACT_TIMEOUT)
        view = await self.state(bus, "state")
        assert view is not None
        assert (view["run_id"], view["state"]) == ("run-st", "function_execute")
        assert (view["turn_count"], view["max_turns"]) == (1, 5)
        so_far = [f["type"] for f in await self.frames(bus, "state")]
        assert "function_execution_start" in so_far, "events are told as the run goes"
        assert "agent_end" not in so_far
        busy = await self.start(bus, "state", "run-other")
        assert (busy["started"], busy.get("queued", False)) == (False, False)
        assert str(busy["reason"]).startswith("session_busy"), busy
        tools.release.set()
        view = await self.finished(bus, "state", "run-st")
        assert (view["state"], view["stop_reason"], view["turn_count"]) == ("stopped", "end", 2)
        assert await self.state(bus, "nobody-ran-here") is None

    # -- run::abort ----------------------------------------------------------------------------
    async def test_abort_ends_a_run_in_flight(
        self, bus: Engine, tools: ContractTools, model: ScriptedProvider
    ) -> None:
        await self.start(bus, "abort", "run-ab")
        await asyncio.wait_for(tools.waiting.wait(), CONTRACT_TIMEOUT)
        reply = await self.call(bus, "run::abort", {"session_id": "abort", "reason": "stop it"})
        assert (reply["session_id"], reply["aborted"]) == ("abort", True)
        assert reply["state"] == "function_execute"
        tools.release.set()
        view = await self.finished(bus, "abort", "run-ab")
        assert (view["state"], view["stop_reason"]) == ("stopped", "aborted")
        assert model.calls == 1, "no model call after the abort"
        frames = await self.frames(bus, "abort")
        told_in_order(frames, "abort", "run-ab")
        assert frames[-1]["data"]["stop_reason"] == "aborted"
        again = await self.call(bus, "run::abort", {"session_id": "abort"})
        assert (again["aborted"], again["state"]) == (False, "stopped")
        nothing = await self.call(bus, "run::abort", {"session_id": "no-run-here"})
        assert nothing["aborted"] is False

    # -- idempotence ---------------------------------------------------------------------------
    async def test_a_start_repeated_with_its_run_id_runs_nothing_twice(
        self, bus: Engine, tools: ContractTools, model: ScriptedProvider
    ) -> None:
        first = await self.start(bus, "again", "run-ag")
        assert first["started"] is True
        await asyncio.wait_for(tools.waiting.wait(), CONTRACT_TIMEOUT)
        # A client retrying a start whose reply it lost: the run exists, nothing new starts
        # (``started`` stays true: the gateway answers 409 to a start neither started nor queued).
        retried = await self.start(bus, "again", "run-ag")
        assert (retried["started"], retried["resumed"], retried["run_id"]) == (True, True, "run-ag")
        tools.release.set()
        before = await self.finished(bus, "again", "run-ag")
        late = await self.start(bus, "again", "run-ag")
        assert (late["started"], late["resumed"], late["run_id"]) == (True, True, "run-ag")
        assert await self.state(bus, "again") == before
        assert len(tools.of(WAIT)) == 1
        assert model.calls == 2
        assert self.roles(await self.path(bus, "again")) == TOOL_TURN
        assert [f["type"] for f in await self.frames(bus, "again")].count("agent_end") == 1

    # -- the gate ------------------------------------------------------------------------------
    async def test_tool_calls_go_through_the_policy(
        self, bus: Engine, tools: ContractTools, model: ScriptedProvider
    ) -> None:
        await self.start(bus, "gate", "run-gate")
        view = await self.finished(bus, "gate", "run-gate")
        assert (view["state"], view["stop_reason"]) == ("stopped", "end")
        [echo] = tools.calls  # the denied tool never ran
        assert (echo.function_id, echo.arguments) == (ECHO, {"text": "ping"})
        assert echo.context is not None
        context = (echo.context.session_id, echo.context.run_id, echo.context.function_call_id)
        assert context == ("gate", "run-gate", "c-echo")
        asked = model.requests[1].messages
        results = {m.function_call_id: m for m in asked if isinstance(m, FunctionResultMessage)}
        assert set(results) == {"c-echo", "c-no"}, "both results reach the model"
        assert not results["c-echo"].is_error
        assert "PING" in text_of(results["c-echo"])
        assert results["c-no"].is_error
        frames = await self.frames(bus, "gate")
        told_in_order(frames, "gate", "run-gate")
        gates = {
            f["data"]["function_call_id"]: (f["data"]["decision"], f["data"]["rule_id"])
            for f in frames
            if f["type"] == "gate_decision"
        }
        assert gates == {"c-echo": ("allow", "contract-tools"), "c-no": ("deny", "no-forbidden")}
        started = [f["data"]["function_call_id"] for f in frames if f["type"].endswith("_start")]
        assert started == ["c-echo"]
        kept = [e["message"] for e in await self.path(bus, "gate")]
        assert {m.get("function_call_id") for m in kept} >= {"c-echo", "c-no"}

    # -- runs after runs -----------------------------------------------------------------------
    async def test_the_next_run_goes_on_from_the_session(
        self, bus: Engine, model: ScriptedProvider
    ) -> None:
        await self.start(bus, "history", "run-h1", "first question")
        await self.finished(bus, "history", "run-h1")
        second = await self.start(bus, "history", None, "second question")
        run_id = second["run_id"]
        assert second["started"] is True
        assert isinstance(run_id, str), "a run id is made"
        assert run_id not in ("", "run-h1")
        view = await self.finished(bus, "history", run_id)
        assert (view["run_id"], view["state"], view["turn_count"]) == (run_id, "stopped", 1)
        asked = [text_of(m) for m in model.requests[1].messages]
        assert asked == ["first question", "First answer.", "second question"]
        path = await self.path(bus, "history")
        assert [text_of(e["message"]) for e in path] == [*asked, "Second answer."]
        frames = await self.frames(bus, "history")
        earlier = await self.frames(bus, "history", "run-h1")
        assert frames[: len(earlier)] == earlier, "the second run is told after the first"
        told_in_order(frames[len(earlier) :], "history", run_id)

    # -- bad input -----------------------------------------------------------------------------
    async def test_bad_requests_fail_with_typed_errors(self, bus: Engine) -> None:
        good = {"session_id": "bad", "provider": PROVIDER, "model": MODEL}
        for payload in (
            {},
            {**good, "session_id": "no spaces allowed"},
            {**good, "max_turns": 0},
            {**good, "messages": [{"role": "robot"}]},
            {key: value for key, value in good.items() if key != "provider"},
        ):
            assert await self.code_of(bus, "run::start", payload) == "invalid_request", payload
        assert await self.code_of(bus, "run::abort", {}) == "invalid_request"
        assert await self.code_of(bus, "turn::get_state", {"session": "bad"}) == "invalid_request"
        assert await self.state(bus, "bad") is None
