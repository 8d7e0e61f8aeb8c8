"""Pure rules of agents working together, used by :func:`.transition.transition`.

A subagent call (``agent::<name>``, traits ``subagent``) does not end in the batch that starts its
child: it waits (status ``waiting``) beside calls parked for approval, in state
``function_awaiting_approval``, until the child's :class:`~tackroom.contracts.agents.
SubagentOutcome` is read (:class:`ChildEnded`). A handoff result (``handoff::<name>``) switches
the run to the other agent and provisions it again before the next model call.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from tackroom.contracts.agents import HandoffTarget, SubagentOutcome
from tackroom.contracts.events import FunctionExecutionEndData, HandoffData, SubagentEndedData
from tackroom.contracts.messages import CustomMessage, FunctionResultMessage, TextBlock, Usage
from tackroom.workers.orchestrator.callevents import call_ended
from tackroom.workers.orchestrator.planning import text_result
from tackroom.workers.orchestrator.record import CallState, TurnRecord

__all__ = ["WAITS", "ChildEnded", "HandoffTaken", "child_ended", "handoff_in", "take_handoff"]

WAITS = frozenset({"parked", "waiting"})
"""Call statuses that keep a turn in ``function_awaiting_approval``."""


@dataclass(frozen=True, slots=True)
class ChildEnded:
    """A waiting call's child run ended: the call's result, the events telling it, and what the
    child spent (its own children's spend included), which the parent run's usage adds up."""

    result: FunctionResultMessage
    ended: SubagentEndedData
    end: FunctionExecutionEndData
    usage: Usage = field(default_factory=Usage)


def child_ended(call: CallState, outcome: SubagentOutcome) -> ChildEnded:
    """The call's result from its child's outcome: the answer (structured when the agent has an
    output schema), or, when the child did not end normally, an error saying why."""
    details: dict[str, Any] = {
        "agent": outcome.agent,
        "child_session_id": outcome.child_session_id,
        "child_run_id": outcome.child_run_id,
        "stop_reason": outcome.stop_reason,
    }
    if outcome.output is not None:
        details["output"] = outcome.output
    if outcome.error is not None:
        details["error"] = outcome.stop_reason or "failed"
        text = f"The {outcome.agent} agent stopped without finishing: {outcome.error}"
        if outcome.text:
            text += f"\nIts last answer: {outcome.text}"
        result = text_result(call, text, is_error=True, details=details)
    else:
        shown = outcome.text
        if outcome.output is not None:
            shown = json.dumps(outcome.output, ensure_ascii=False)
        result = text_result(call, shown, details=details)
    result.label = outcome.label
    return ChildEnded(
        result=result,
        ended=SubagentEndedData(
            function_call_id=call.id,
            agent=outcome.agent,
            child_session_id=outcome.child_session_id,
            child_run_id=outcome.child_run_id,
            state=outcome.state,
            stop_reason=outcome.stop_reason,
        ),
        end=call_ended(call, result),
        usage=outcome.usage,
    )


@dataclass(frozen=True, slots=True)
class HandoffTaken:
    target: HandoffTarget
    note: CustomMessage
    event: HandoffData


def handoff_in(r: TurnRecord) -> HandoffTaken | None:
    """The first successful handoff among the batch's results (one agent takes over)."""
    for call in r.calls:
        tool = r.tool(call.tool_name)
        result = call.result
        if tool is None or not tool.traits.handoff or result is None or result.is_error:
            continue
        raw = result.details.get("handoff") if isinstance(result.details, dict) else None
        if raw is None:
            continue
        target = HandoffTarget.model_validate(raw)
        origin = r.agent or "the main agent"
        note = CustomMessage(
            custom_type="handoff",
            content=[TextBlock(text=f"{origin} handed the conversation to {target.agent}.")],
            details={"from_agent": r.agent, "to_agent": target.agent, "function_call_id": call.id},
        )
        event = HandoffData(
            function_call_id=call.id,
            from_agent=r.agent,
            to_agent=target.agent,
            provider=target.provider,
            model=target.model,
        )
        return HandoffTaken(target, note, event)
    return None


def take_handoff(r: TurnRecord, target: HandoffTarget) -> None:
    """From the next model call on, the run is ``target``: its model, instructions and tools."""
    r.agent = target.agent
    r.provider, r.model = target.provider, target.model
    r.instructions = target.instructions or None
    r.system_prompt_override = None
    r.tool_patterns = list(target.tools)
    r.state = "provisioning"
