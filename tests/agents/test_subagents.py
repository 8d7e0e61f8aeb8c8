"""Subagents end to end through the facade, on each engine backend.

The lead calls ``agent::alpha`` and ``agent::beta`` in one message — both children answer only
once both are being answered (a barrier), so they provably run together — then ``agent::gamma``
(structured output) with both answers, then answers with all three. Each call's child runs in a
child session linked both ways; the parent's stream names each child; a child over its
sub-budget stops with a budget reason the parent reads; subagents nested too deep are refused.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from tackroom.contracts.agents import LINKS_SCOPE, OUTCOMES_SCOPE, AgentDefinition, child_ids
from tackroom.contracts.events import EVENTS
from tackroom.contracts.messages import AgentMessage, Usage, text_of
from tackroom.harness.models import ModelChunk, ToolCall
from tackroom.testing import FunctionModel, ModelInfo
from tackroom.testing.backends import BACKENDS, engine_url_for

from ..turn.harness import messages_of, wait_for_state, wait_for_terminal
from .scenario import CALLS, FINAL, PROMPT, Barrier, answer, harness_for, results_by_call

pytestmark = pytest.mark.parametrize("backend", list(BACKENDS))


async def _types(harness: Any, session: str) -> list[dict[str, Any]]:
    records = await harness.engine.read(EVENTS.name, session, after=0, limit=10_000)
    return [r.data for r in records]


async def test_parallel_then_sequential_subagents_feed_the_final_answer(
    backend: str, tmp_path: Path
) -> None:
    model = FunctionModel(answer(barrier=Barrier()))
    harness = harness_for(tmp_path, engine=engine_url_for(backend, tmp_path), model=model)
    async with harness:
        result = await harness.run(PROMPT, session="lead", run_id="run-lead")
        frames = await _types(harness, "lead")
        children = {name: child_ids("lead", "run-lead", call, name) for name, call in CALLS.items()}
        child_views = {n: await harness.get_state(s) for n, (s, _) in children.items()}
        links = {
            n: await harness.engine.get_state(LINKS_SCOPE, s) for n, (s, _) in children.items()
        }
        child_entries = {
            n: (await harness.bus.trigger("session-tree::messages", {"session_id": s}))["messages"]
            for n, (s, _) in children.items()
        }
    assert result.ok, result.error
    assert result.output == FINAL
    # Each child: its own session and deterministic run, ended normally, linked to its call.
    for name, (_session, run) in children.items():
        view = child_views[name]
        assert view is not None
        assert (view.run_id, view.state, view.stop_reason, view.agent) == (
            run,
            "stopped",
            "end",
            name,
        )
        link = links[name]
        assert link is not None
        assert link.value["function_call_id"] == CALLS[name]
        note, task, reply = (entry["message"] for entry in child_entries[name])
        assert (note["role"], note["custom_type"]) == ("custom", "subagent")
        assert note["details"]["session_id"] == "lead"
        assert task["role"] == "user"
        assert reply["role"] == "assistant"
    # The parent's result names the child; gamma's is structured.
    results = results_by_call(result.messages)
    gamma = results[CALLS["gamma"]]
    assert gamma.details["output"] == {"combined": "ALPHA(a-task)+BETA(b-task)"}
    assert gamma.details["child_session_id"] == children["gamma"][0]
    # The stream: alpha and beta start in one batch before either ends; gamma after both.
    kinds = [(f["type"], f["data"].get("agent")) for f in frames if f["type"].startswith("sub")]
    assert kinds == [
        ("subagent_started", "alpha"),
        ("subagent_started", "beta"),
        ("subagent_ended", "alpha"),
        ("subagent_ended", "beta"),
        ("subagent_started", "gamma"),
        ("subagent_ended", "gamma"),
    ] or kinds == [
        ("subagent_started", "alpha"),
        ("subagent_started", "beta"),
        ("subagent_ended", "beta"),
        ("subagent_ended", "alpha"),
        ("subagent_started", "gamma"),
        ("subagent_ended", "gamma"),
    ]
    started = [f for f in frames if f["type"] == "subagent_started"]
    assert [f["data"]["child_session_id"] for f in started] == [s for s, _ in children.values()]
    # The lead's model was called three times; every child once.
    lead_calls = [r for r in model.requests if r.session_id == "lead"]
    assert len(lead_calls) == 3
    assert sorted(r.session_id or "" for r in model.requests if r.session_id != "lead") == sorted(
        s for s, _ in children.values()
    )


async def test_the_event_tree_streams_the_children_under_the_parent(
    backend: str, tmp_path: Path
) -> None:
    """Followed live from before the run starts: every child's events arrive, each naming its
    child session, and the tree ends once the lead and its three children have ended."""
    harness = harness_for(
        tmp_path, engine=engine_url_for(backend, tmp_path), model=FunctionModel(answer())
    )
    async with harness:
        seen: list[Any] = []

        async def collect() -> None:
            async for event in harness.events_tree("tree", run_id="run-tree"):
                seen.append(event)

        follower = asyncio.create_task(collect())
        await asyncio.sleep(0)  # subscribed before the run starts: everything arrives live
        await harness.submit(PROMPT, session="tree", run_id="run-tree")
        await asyncio.wait_for(follower, timeout=30)
    children = {child_ids("tree", "run-tree", call, name)[0] for name, call in CALLS.items()}
    by_session: dict[str, list[str]] = {}
    for event in seen:
        by_session.setdefault(event.session_id, []).append(event.type)
    assert set(by_session) == {"tree", *children}
    for session, types in by_session.items():
        assert types.count("agent_end") == 1, session
        assert types[-1] in ("agent_end", "turn_end", "turn_state_changed")
    assert "message_complete" in by_session[next(iter(children))]
    # A child's events come after the parent announced it, and end before the parent's end.
    order = [(e.session_id, e.type) for e in seen]
    for child in children:
        started = next(
            i
            for i, e in enumerate(seen)
            if e.type == "subagent_started" and e.data.child_session_id == child
        )
        first_own = order.index((child, "turn_state_changed"))
        assert started < first_own < order.index(("tree", "agent_end"))


async def test_a_child_over_its_sub_budget_stops_and_the_parent_reads_why(
    backend: str, tmp_path: Path
) -> None:
    def respond(messages: list[AgentMessage], info: ModelInfo) -> str | list[ModelChunk]:
        if "[agent:spender]" in info.system_prompt:
            # Each answer costs 2 cents; the child's cap is 1 cent: its second call is refused.
            return [ToolCall("calc__add", {"a": 1, "b": 2}), Usage(cost_usd=0.02)]
        results = results_by_call(messages)
        if "call-spend" not in results:
            return [ToolCall("agent__spender", {"task": "spend"}, id="call-spend")]
        return "parent read: " + text_of(results["call-spend"].content)

    spender = AgentDefinition(
        name="spender", instructions="[agent:spender]", tools=["calc::*"], budget_usd=0.01
    )
    harness = harness_for(
        tmp_path,
        engine=engine_url_for(backend, tmp_path),
        model=FunctionModel(respond),
        agents=[spender],
        workers=["budget"],
        orchestrator={
            "budget_check_function": "budget::check",
            "budget_record_function": "budget::record",
        },
    )
    async with harness:
        result = await harness.run("spend it", session="payer", run_id="run-payer")
        child, _ = child_ids("payer", "run-payer", "call-spend", "spender")
        view = await harness.get_state(child)
        outcome = await harness.engine.get_state(OUTCOMES_SCOPE, "payer/call-spend")
    assert result.ok, result.error
    assert view is not None
    assert view.stop_reason == "budget_exceeded"
    assert outcome is not None
    assert outcome.value["stop_reason"] == "budget_exceeded"
    spent = results_by_call(result.messages)["call-spend"]
    assert spent.is_error
    assert spent.details["error"] == "budget_exceeded"
    assert "budget" in text_of(spent.content)
    assert result.output.startswith("parent read: The spender agent stopped without finishing")


async def test_subagents_nested_past_the_depth_limit_are_refused(
    backend: str, tmp_path: Path
) -> None:
    def respond(messages: list[AgentMessage], info: ModelInfo) -> str | list[ModelChunk]:
        results = [m for m in messages if m.role == "function_result"]
        if not results:
            return [ToolCall("agent__nest", {"task": "go deeper"}, id="call-nest")]
        return "depth says: " + text_of(results[-1].content)

    nest = AgentDefinition(name="nest", instructions="[agent:nest]", tools=["agent::nest"])
    harness = harness_for(
        tmp_path,
        engine=engine_url_for(backend, tmp_path),
        model=FunctionModel(respond),
        agents=[nest],
        agents_config={"max_depth": 2},
    )
    async with harness:
        result = await harness.run("nest", session="top", run_id="run-top")
        first, first_run = child_ids("top", "run-top", "call-nest", "nest")
        second, _ = child_ids(first, first_run, "call-nest", "nest")
        depth = await harness.engine.get_state(LINKS_SCOPE, second)
        events = await _types(harness, second)
    assert result.ok, result.error
    assert depth is not None
    assert depth.value["depth"] == 2
    # The depth-2 child's own call was refused with a clear error result, and it said so.
    refused = [
        f["data"]["result"]
        for f in events
        if f["type"] == "function_execution_end" and f["data"]["is_error"]
    ]
    assert len(refused) == 1
    assert refused[0]["details"] == {"error": "subagent_refused"}
    assert "nest at most 2 deep" in text_of_json(refused[0])
    assert "nest at most 2 deep" in result.output


def text_of_json(message: dict[str, Any]) -> str:
    return " ".join(b.get("text", "") for b in message["content"])


async def test_a_handoff_switches_agent_for_the_rest_of_the_run(
    backend: str, tmp_path: Path
) -> None:
    def respond(messages: list[AgentMessage], info: ModelInfo) -> str | list[ModelChunk]:
        if "[agent:billing]" in info.system_prompt:
            tools = sorted(tool.name for tool in info.tools)
            return f"billing here, tools {tools}"
        return [ToolCall("handoff__billing", {"reason": "a refund"}, id="call-hand")]

    billing = AgentDefinition(name="billing", instructions="[agent:billing]", tools=["calc::*"])
    harness = harness_for(
        tmp_path,
        engine=engine_url_for(backend, tmp_path),
        model=FunctionModel(respond),
        agents=[billing],
        tools=["handoff::billing"],
    )
    async with harness:
        result = await harness.run("I want a refund", session="desk", run_id="run-desk")
        view = await harness.get_state("desk")
        entries = (await harness.bus.trigger("session-tree::messages", {"session_id": "desk"}))[
            "messages"
        ]
        frames = await _types(harness, "desk")
    assert result.ok, result.error
    assert result.agent == "billing"
    assert view is not None
    assert view.agent == "billing"
    assert result.output == "billing here, tools ['calc__add', 'calc__evaluate']"
    notes = [e["message"] for e in entries if e["message"]["role"] == "custom"]
    assert [n["custom_type"] for n in notes] == ["handoff"]
    assert notes[0]["details"] == {
        "from_agent": None,
        "to_agent": "billing",
        "function_call_id": "call-hand",
    }
    (handoff,) = [f for f in frames if f["type"] == "handoff"]
    assert handoff["data"]["to_agent"] == "billing"
    assert json.loads(json.dumps(handoff["data"]))["from_agent"] is None


async def test_aborting_the_parent_aborts_its_waiting_child(backend: str, tmp_path: Path) -> None:
    release = asyncio.Event()

    async def respond(messages: list[AgentMessage], info: ModelInfo) -> str | list[ModelChunk]:
        if "[agent:slow]" in info.system_prompt:
            await release.wait()
            return "too late"
        return [ToolCall("agent__slow", {"task": "take your time"}, id="call-slow")]

    slow = AgentDefinition(name="slow", instructions="[agent:slow]")
    harness = harness_for(
        tmp_path,
        engine=engine_url_for(backend, tmp_path),
        model=FunctionModel(respond),
        agents=[slow],
    )
    child, _ = child_ids("boss", "run-boss", "call-slow", "slow")
    async with harness:
        await harness.submit("go", session="boss", run_id="run-boss")
        await wait_for_state(harness, "boss", "function_awaiting_approval")
        await wait_for_state(harness, child, "assistant_streaming")
        assert await harness.abort("boss", reason="changed my mind")
        parent = await wait_for_terminal(harness, "boss")
        release.set()
        view = await wait_for_terminal(harness, child)
        entries = await messages_of(harness.engine, "boss")
    assert (parent.state, parent.stop_reason) == ("stopped", "aborted")
    assert (view.state, view.stop_reason) == ("stopped", "aborted")
    (aborted,) = [e["message"] for e in entries if e["message"]["role"] == "function_result"]
    assert aborted["function_call_id"] == "call-slow"
    assert "aborted: changed my mind" in text_of_json(aborted)
