"""The turn's rules for subagent calls and handoffs, as a table (pure: no event loop)."""

from __future__ import annotations

from typing import Any

from tackroom.contracts.agents import HandoffTarget, SubagentOutcome
from tackroom.contracts.events import SubagentStartedData
from tackroom.contracts.messages import (
    AssistantMessage,
    FunctionCallBlock,
    FunctionResultMessage,
    TextBlock,
    text_of,
)
from tackroom.contracts.tools import ToolTraits
from tackroom.workers.orchestrator.delegation import child_ended
from tackroom.workers.orchestrator.record import ToolOffer, TurnRecord
from tackroom.workers.orchestrator.transition import (
    AbortRequested,
    AppendEntries,
    ApprovalsRead,
    AssistantCompleted,
    CallsSettled,
    EmitEvent,
    Transition,
    transition,
)

SCHEMA = {"type": "object", "properties": {"task": {"type": "string"}}, "required": ["task"]}
TOOLS = [
    ToolOffer(
        name=f"agent__{n}",
        function_id=f"agent::{n}",
        parameters=SCHEMA,
        traits=ToolTraits(subagent=True, idempotent=True, parallel=True),
    )
    for n in ("a", "b")
] + [
    ToolOffer(
        name="handoff__desk",
        function_id="handoff::desk",
        parameters={"type": "object"},
        traits=ToolTraits(handoff=True, idempotent=True),
    )
]


def events(t: Transition) -> list[str]:
    return [e.type for e in t.effects if isinstance(e, EmitEvent)]


def appended(t: Transition) -> list[str]:
    return [i for e in t.effects if isinstance(e, AppendEntries) for i, _ in e.entries]


def asked(*names: str) -> TurnRecord:
    """A record in function_execute with one call ``call-<name>`` per subagent name."""
    base = TurnRecord(
        session_id="s",
        run_id="r",
        provider="p",
        model="m",
        state="assistant_streaming",
        tools=TOOLS,
    )
    message = AssistantMessage(
        content=[
            FunctionCallBlock(id=f"call-{n}", tool_name=f"agent__{n}", arguments={"task": n})
            for n in names
        ],
        stop_reason="function_call",
    )
    return transition(base, AssistantCompleted(message)).record


def started(name: str) -> SubagentStartedData:
    return SubagentStartedData(
        function_call_id=f"call-{name}",
        agent=name,
        child_session_id=f"sub-{name}",
        child_run_id=f"run-{name}",
    )


def ended(r: TurnRecord, name: str, **outcome: Any) -> Any:
    call = next(c for c in r.calls if c.id == f"call-{name}")
    values: dict[str, Any] = {
        "agent": name,
        "child_session_id": f"sub-{name}",
        "child_run_id": f"run-{name}",
        "state": "stopped",
        "stop_reason": "end",
        "text": f"{name} says hi",
        **outcome,
    }
    return child_ended(call, SubagentOutcome(**values))


def test_started_children_park_the_turn_until_every_one_has_ended() -> None:
    t = transition(
        asked("a", "b"), CallsSettled(waiting={"call-a": started("a"), "call-b": started("b")})
    )
    assert t.record.state == "function_awaiting_approval"
    assert [c.status for c in t.record.calls] == ["waiting", "waiting"]
    assert events(t) == ["turn_state_changed", "subagent_started", "subagent_started"]
    assert t.record.view().awaiting_approval == []  # nobody is asked for a decision

    one = transition(t.record, ApprovalsRead({}, {"call-a": ended(t.record, "a")}))
    assert one.record.state == "function_awaiting_approval"
    assert events(one) == ["subagent_ended", "function_execution_end"]
    nothing = transition(one.record, ApprovalsRead({}, {}))
    assert not nothing.changed  # a wake with nothing new changes nothing

    both = transition(one.record, ApprovalsRead({}, {"call-b": ended(one.record, "b")}))
    assert both.record.state == "function_execute"
    settled = transition(both.record, CallsSettled())
    assert settled.record.state == "steering_check"
    assert appended(settled) == ["r-fr-call-a", "r-fr-call-b"]
    results = [m for e in settled.effects if isinstance(e, AppendEntries) for _, m in e.entries]
    texts = [text_of(m.content) for m in results]
    assert texts == ["a says hi", "b says hi"]


def test_a_child_that_did_not_end_normally_is_an_error_result_saying_why() -> None:
    r = transition(asked("a"), CallsSettled(waiting={"call-a": started("a")})).record
    child = ended(r, "a", stop_reason="budget_exceeded", error="its budget is spent", text="")
    assert child.result.is_error
    assert child.result.details["error"] == "budget_exceeded"
    assert text_of(child.result.content) == (
        "The a agent stopped without finishing: its budget is spent"
    )


def test_structured_output_is_the_result_text_and_details() -> None:
    r = transition(asked("a"), CallsSettled(waiting={"call-a": started("a")})).record
    child = ended(r, "a", text='{"x": 1}', output={"x": 1})
    assert text_of(child.result.content) == '{"x": 1}'
    assert child.result.details["output"] == {"x": 1}


def test_an_abort_closes_waiting_calls() -> None:
    r = transition(asked("a"), CallsSettled(waiting={"call-a": started("a")})).record
    t = transition(r, AbortRequested("stop"))
    assert t.record.stop_reason == "aborted"
    (call,) = t.record.calls
    assert call.result is not None
    assert call.result.details["decision"] == "aborted"
    assert "r-fr-call-a" in appended(t)


def test_a_handoff_switches_the_agent_and_provisions_again() -> None:
    base = TurnRecord(
        session_id="s",
        run_id="r",
        provider="p",
        model="m",
        state="assistant_streaming",
        tools=TOOLS,
    )
    message = AssistantMessage(
        content=[FunctionCallBlock(id="h1", tool_name="handoff__desk", arguments={})],
        stop_reason="function_call",
    )
    r = transition(base, AssistantCompleted(message)).record
    target = HandoffTarget(
        agent="desk", provider="q", model="n", instructions="Be the desk.", tools=["calc::*"]
    )
    reply = FunctionResultMessage(
        function_call_id="h1",
        function_id="handoff::desk",
        content=[TextBlock(text="handed")],
        details={"handoff": target.model_dump(mode="json")},
    )
    t = transition(r, CallsSettled(results={"h1": reply}))
    new = t.record
    assert (new.state, new.agent, new.provider, new.model) == ("provisioning", "desk", "q", "n")
    assert (new.instructions, new.tool_patterns) == ("Be the desk.", ["calc::*"])
    assert appended(t) == ["r-fr-h1", "r-t1-handoff"]
    assert "handoff" in events(t)
