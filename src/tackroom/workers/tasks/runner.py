"""One attempt of one step instance: the approval gate, the backoff wait, then the call, the
agent run or the sub-graph — each turned into an :class:`~.planner.Outcome` (never an exception
for what the step itself did wrong; an engine that is away raises, so the queue retries).

Agent steps wait for their run's ``agent_end`` inside the delivery (bounded by the step's
timeout, the lease extended as it goes): a redelivery after a crash finds the same run (its id
derives from the instance and attempt, and ``run::start`` of a known run id starts nothing)
and reads its events from the start. Sub-graph steps do not wait: they park, and the child
run's last commit wakes them.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from typing import Any

from tackroom.contracts.approvals import (
    DECISIONS_SCOPE,
    REQUEST,
    ApprovalRequest,
    call_key,
)
from tackroom.contracts.events import EVENTS, AgentEnd, MessageComplete
from tackroom.contracts.messages import AssistantMessage, UserMessage, text_of
from tackroom.contracts.tasks import (
    RUNS_SCOPE,
    AgentSpec,
    Instance,
    StepSpec,
    TaskRun,
    approval_call_id,
    approval_session,
)
from tackroom.contracts.turn import RUN_ABORT, RUN_START, RunAbortRequest, RunStartRequest
from tackroom.engine.errors import (
    EngineUnavailable,
    FunctionNotFound,
    InvocationError,
    InvocationTimeout,
)
from tackroom.engine.protocol import Engine, current_invocation
from tackroom.kit.output import answer_format
from tackroom.kit.taskgraph.refs import RefError, render
from tackroom.workers.tasks.planner import GraphPlan, Outcome, template_scope

__all__ = ["Runner", "agent_ids", "child_run_id"]

_MAX_ID = 120


def _bounded(text: str, prefix: str) -> str:
    if len(text) <= _MAX_ID:
        return text
    return f"{prefix}-{hashlib.sha256(text.encode()).hexdigest()[:24]}"


def child_run_id(run_id: str, instance_id: str, instance: Instance) -> str:
    return _bounded(f"{run_id}.{instance_id}.{instance.epoch}.{instance.attempt}", "sub")


def agent_ids(run_id: str, instance_id: str, instance: Instance) -> tuple[str, str]:
    """The session and the agent run id of an attempt of an agent step."""
    session = _bounded(f"tasks.{run_id}.{instance_id}", "tasks")
    return session, _bounded(f"{instance_id}.{instance.epoch}.{instance.attempt}", "run")


class Runner:
    def __init__(
        self, engine: Engine, *, call_timeout: float, agent_timeout: float, start_child: Any
    ) -> None:
        self._engine = engine
        self._call_timeout = call_timeout
        self._agent_timeout = agent_timeout
        self._start_child = start_child

    async def attempt(
        self, run: TaskRun, plan: GraphPlan, step: StepSpec, instance_id: str
    ) -> Outcome | None:
        """What this attempt came to; ``None`` when it still waits (an approval, a child run)."""
        instance = run.instances[instance_id]
        if instance.status == "in_child":
            return await self._child_outcome(instance)
        scope = template_scope(run, instance_id)
        try:
            payload = render(step.input, scope)
        except RefError as exc:
            return Outcome("failure", error_class="input", message=str(exc), retryable=False)
        if step.requires_approval:
            gate = await self._approval(run, step, instance_id, instance, payload)
            if gate is None or isinstance(gate, Outcome):
                return gate
        await _wait_until(instance.not_before)
        if step.call is not None:
            return await self._call(step, step.call, payload)
        if step.agent is not None:
            return await self._agent(run, plan, step, instance_id, instance, scope)
        return await self._subgraph(run, step, instance_id, instance, payload)

    async def _approval(
        self, run: TaskRun, step: StepSpec, instance_id: str, instance: Instance, payload: Any
    ) -> Outcome | bool | None:
        session = approval_session(run.run_id)
        call_id = approval_call_id(instance_id, instance.epoch)
        decision = await DECISIONS_SCOPE.get(self._engine, call_key(session, call_id))
        if decision is not None:
            if decision.decision == "allow":
                return True
            reason = decision.reason or decision.decision
            return Outcome("failure", error_class="denied", message=reason, retryable=False)
        if instance.status == "awaiting_approval":
            return None
        reply = await REQUEST.call(
            self._engine,
            ApprovalRequest(
                session_id=session,
                function_call_id=call_id,
                function_id=step.call or f"tasks:{step.kind}",
                arguments=payload if isinstance(payload, dict) else {"input": payload},
                reason=f"task graph {run.graph_name!r}, step {instance_id}",
                run_id=run.run_id,
            ),
        )
        if reply.status == "pending":
            return Outcome("park", park_status="awaiting_approval")
        return True

    async def _call(self, step: StepSpec, function_id: str, payload: Any) -> Outcome:
        timeout = step.timeout or self._call_timeout
        await _extend(timeout)
        try:
            output = await self._engine.trigger(function_id, payload, timeout=timeout)
        except InvocationTimeout:
            return Outcome("failure", error_class="timeout", message=f"no answer in {timeout}s")
        except FunctionNotFound as exc:
            return Outcome("failure", error_class="not_found", message=str(exc))
        except InvocationError as exc:
            return Outcome("failure", error_class=exc.remote_code, message=str(exc))
        return Outcome("success", output=output)

    async def _subgraph(
        self, run: TaskRun, step: StepSpec, instance_id: str, instance: Instance, payload: Any
    ) -> Outcome:
        assert step.graph is not None
        if payload is not None and not isinstance(payload, dict):
            message = "a sub-graph's input is a mapping of its inputs"
            return Outcome("failure", error_class="input", message=message, retryable=False)
        child_id = child_run_id(run.run_id, instance_id, instance)
        try:
            child = await self._start_child(
                run=run,
                graph=step.graph,
                inputs=payload or {},
                run_id=child_id,
                instance_id=instance_id,
                attempt=instance.attempt,
            )
        except ValueError as exc:
            return Outcome("failure", error_class="input", message=str(exc), retryable=False)
        if child.terminal:
            return _child_result(child)
        return Outcome("park", park_status="in_child", child_run=child_id)

    async def _child_outcome(self, instance: Instance) -> Outcome | None:
        child = await RUNS_SCOPE.get(self._engine, instance.child_run or "")
        if child is None:
            return Outcome("failure", error_class="input", message="the sub-graph run is gone")
        return _child_result(child) if child.terminal else None

    async def _agent(
        self,
        run: TaskRun,
        plan: GraphPlan,
        step: StepSpec,
        instance_id: str,
        instance: Instance,
        scope: dict[str, Any],
    ) -> Outcome:
        agent = step.agent
        assert agent is not None
        fields = _configured(agent)
        if isinstance(fields, Outcome):
            return fields
        model = agent.model or (None if "provider" in fields else plan.graph.model or run.model)
        if model is not None and ":" in model:
            provider, _, model_name = model.partition(":")
            fields.update(provider=provider, model=model_name, fallbacks=[])
        elif "provider" not in fields or model is not None:
            message = "no model: give the step (or the graph) model: PROVIDER:MODEL"
            return Outcome("failure", error_class="input", message=message, retryable=False)
        try:
            prompt = render(agent.prompt, scope)
            instructions = render(agent.instructions, scope) or fields.pop("instructions", None)
        except RefError as exc:
            return Outcome("failure", error_class="input", message=str(exc), retryable=False)
        if agent.output_schema is not None:
            format_ = answer_format(agent.output_schema, name=step.id)
            instructions = f"{instructions}\n\n{format_}" if instructions else format_
        session, agent_run = agent_ids(run.run_id, instance_id, instance)
        fields["instructions"] = instructions
        request = RunStartRequest(
            **fields,
            session_id=session,
            run_id=agent_run,
            messages=[UserMessage.text(_text(prompt))],
        )
        reply = await RUN_START.call(self._engine, request)
        if not reply.started and not reply.resumed:
            return Outcome("failure", error_class="busy", message=reply.reason or "not started")
        timeout = step.timeout or self._agent_timeout
        try:
            answer, end = await asyncio.wait_for(self._agent_end(session, agent_run), timeout)
        except TimeoutError:
            await RUN_ABORT.send(self._engine, RunAbortRequest(session_id=session))
            return Outcome("failure", error_class="timeout", message=f"no answer in {timeout}s")
        if end.data.state == "failed":
            error = end.data.error.message if end.data.error else end.data.stop_reason
            return Outcome("failure", error_class="agent_failed", message=error or "failed")
        if agent.output_schema is None:
            return Outcome("success", output=answer)
        return _structured(answer, agent.output_schema)

    async def _agent_end(self, session: str, agent_run: str) -> tuple[str, AgentEnd]:
        answer = ""
        await _extend(60)
        async for _, event in EVENTS.events(self._engine, session):
            if event.run_id != agent_run:
                continue
            if isinstance(event, MessageComplete) and isinstance(
                event.data.message, AssistantMessage
            ):
                answer = text_of(event.data.message.content)
                await _extend(60)
            elif isinstance(event, AgentEnd):
                return answer, event
        raise EngineUnavailable("the event stream ended before the agent run did")


def _configured(agent: AgentSpec) -> dict[str, Any] | Outcome:
    """The run request's fields from the step's ``agent_config`` under what the step sets
    itself (``tools``, ``max_turns``; the model and instructions are merged by the caller)."""
    config = agent.agent_config
    fields: dict[str, Any] = {"tools": [], "max_turns": 8}
    if config is not None:
        fields.update(config.run_fields())
    if agent.tools is not None:
        fields["tools"] = list(agent.tools)
    if agent.max_turns is not None:
        fields["max_turns"] = agent.max_turns
    return fields


def _child_result(child: TaskRun) -> Outcome:
    if child.status == "succeeded":
        return Outcome("success", output=child.outputs)
    message = f"sub-graph run {child.run_id} {child.status}: {child.error or ''}".strip()
    return Outcome("failure", error_class="subgraph_failed", message=message)


def _structured(answer: str, schema: dict[str, Any]) -> Outcome:
    import jsonschema  # only agent steps with an output schema pay for it

    text = answer.strip().removeprefix("```json").removeprefix("```").removesuffix("```")
    try:
        value = json.loads(text)
        jsonschema.validate(value, schema)
    except (ValueError, jsonschema.ValidationError) as exc:
        message = f"the answer is not JSON valid against output_schema: {str(exc)[:300]}"
        return Outcome("failure", error_class="invalid_output", message=message)
    return Outcome("success", output=value)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


async def _extend(seconds: float) -> None:
    invocation = current_invocation()
    if invocation is not None:
        await invocation.extend_visibility(seconds + 30)


async def _wait_until(moment: float | None) -> None:
    """A retry's backoff, inside the delivery (its lease extended to cover it)."""
    if moment is None:
        return
    delay = moment - time.time()
    if delay > 0:
        await _extend(delay)
        await asyncio.sleep(delay)
