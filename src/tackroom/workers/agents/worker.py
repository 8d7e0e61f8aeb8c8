"""The ``agents`` worker: each configured agent as ``agent::<name>`` and ``handoff::<name>``.

``agent::<name>`` starts the child run of one call: a child session and run whose ids derive from
the parent's run and call (:func:`~tackroom.contracts.agents.child_ids`), so a redelivered step
finds the same child (``run::start`` is idempotent on the run id) and never starts a second. The
child's session opens with a ``subagent`` note naming the parent call (the link in the session
tree; the parent's result names the child), and its link is kept in ``subagent-links`` so a
grandchild knows its depth. A definition's ``budget_usd`` becomes a total budget on the child's
session (``session/<child>``), which the budget worker checks before each of its model calls.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from tackroom.contracts import budget
from tackroom.contracts.agents import (
    AGENT_PREFIX,
    HANDOFF_PREFIX,
    LINKS_SCOPE,
    AgentDefinition,
    HandoffTarget,
    ParentLink,
    SubagentReply,
    SubagentRequest,
    child_ids,
)
from tackroom.contracts.messages import CustomMessage, TextBlock, UserMessage
from tackroom.contracts.provenance import joined
from tackroom.contracts.tools import CallContext, ToolTraits
from tackroom.contracts.turn import RUN_START, RunStartRequest
from tackroom.engine.errors import FunctionError, InvocationError, unavailable_cause
from tackroom.kit.forgetting import forget_deleted_sessions
from tackroom.kit.output import answer_format
from tackroom.runtime.tools import register_tool
from tackroom.runtime.worker import WorkerConfig, WorkerContext, WorkerSpec

__all__ = ["WORKER", "AgentsConfig"]

SUBAGENT_TIMEOUT = 3600.0
"""Seconds the calling turn waits for the start of a child (not its end: it parks for that)."""


class AgentsConfig(WorkerConfig):
    agents: list[AgentDefinition] = Field(default_factory=list)
    default_model: str | None = Field(default=None, pattern=r"^[a-zA-Z0-9_-]+:.+$")
    """``PROVIDER:MODEL`` of an agent that names none (the facade sets the harness's)."""
    max_depth: int = Field(default=3, ge=1, le=32)
    """How deep subagents may nest: a call that would start a child deeper is refused."""

    @field_validator("agents")
    @classmethod
    def _unique(cls, agents: list[AgentDefinition]) -> list[AgentDefinition]:
        names = [agent.name for agent in agents]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise ValueError(f"agent names must be unique; {', '.join(twice)} appear twice")
        return agents


class _HandoffRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str = Field(default="", max_length=2000, description="why this agent should take over")


class _HandoffReply(BaseModel):
    content: list[TextBlock]
    details: dict[str, Any]


class Agents:
    def __init__(self, ctx: WorkerContext[AgentsConfig]) -> None:
        self._engine = ctx.engine
        self._config = ctx.config

    def _model_of(self, agent: AgentDefinition) -> tuple[str, str]:
        model = agent.model or self._config.default_model
        if model is None:
            raise FunctionError(
                "invalid_config",
                f"agent {agent.name!r} names no model and the agents worker has no default_model",
            )
        provider, _, name = model.partition(":")
        return provider, name

    def _instructions(self, agent: AgentDefinition) -> str:
        parts = [agent.instructions] if agent.instructions else []
        if agent.output_schema is not None:
            parts.append(answer_format(agent.output_schema, name=f"{agent.name} output"))
        return "\n\n".join(parts)

    def subagent(
        self, agent: AgentDefinition
    ) -> Callable[[SubagentRequest, CallContext | None], Awaitable[SubagentReply]]:
        async def call(request: SubagentRequest, context: CallContext | None) -> SubagentReply:
            if context is None or context.run_id is None:
                raise FunctionError(
                    "invalid_request", f"{AGENT_PREFIX}{agent.name} is called by a run's turn"
                )
            try:
                # The link, the sub-budget and the child's start: one commit where the engine
                # can (a start cut short leaves nothing behind; a redelivered one does it all).
                async with self._engine.transaction():
                    return await self._start(agent, request, context)
            except Exception as exc:
                # Say "the engine is away" to the caller in those words, also through a
                # nested call (run::start), so its step is retried, not failed: a start is
                # idempotent.
                cause = unavailable_cause(exc)
                if cause is None:
                    raise
                raise cause from None

        return call

    async def _start(
        self, agent: AgentDefinition, request: SubagentRequest, context: CallContext
    ) -> SubagentReply:
        assert context.run_id is not None
        depth = await self._depth(context.session_id) + 1
        if depth > self._config.max_depth:
            return SubagentReply(
                status="refused",
                agent=agent.name,
                reason=f"subagents nest at most {self._config.max_depth} deep; this call would"
                f" start one at depth {depth}. Do the task yourself.",
            )
        session_id, run_id = child_ids(
            context.session_id, context.run_id, context.function_call_id, agent.name
        )
        link = ParentLink(
            session_id=context.session_id,
            run_id=context.run_id,
            function_call_id=context.function_call_id,
            agent=agent.name,
            depth=depth,
            output_schema=agent.output_schema,
        )
        await self._engine.set_state(LINKS_SCOPE, session_id, link.model_dump(mode="json"))
        if agent.budget_usd is not None:
            await self._sub_budget(session_id, agent)
        provider, model = self._model_of(agent)
        note = CustomMessage(
            custom_type="subagent",
            content=[TextBlock(text=f"The {agent.name} agent, called by {context.session_id}.")],
            display=False,
            details=link.model_dump(mode="json"),
        )
        reply = await RUN_START.call(
            self._engine,
            RunStartRequest(
                session_id=session_id,
                run_id=run_id,
                provider=provider,
                model=model,
                messages=[note, _task(request.task, context)],
                max_turns=agent.max_turns,
                instructions=self._instructions(agent) or None,
                tools=list(agent.tools),
                agent=agent.name,
                parent=link,
                principal=context.principal,
            ),
        )
        if not reply.started:
            return SubagentReply(status="refused", agent=agent.name, reason=reply.reason)
        return SubagentReply(
            status="running", agent=agent.name, child_session_id=session_id, child_run_id=run_id
        )

    async def _depth(self, session_id: str) -> int:
        entry = await self._engine.get_state(LINKS_SCOPE, session_id)
        return 0 if entry is None else ParentLink.model_validate(entry.value).depth

    async def _sub_budget(self, session_id: str, agent: AgentDefinition) -> None:
        assert agent.budget_usd is not None
        try:
            await budget.CREATE.call(
                self._engine,
                budget.CreateRequest(
                    id=f"subagent-{session_id}",
                    scope=f"session/{session_id}",
                    period="total",
                    cap_usd=agent.budget_usd,
                    name=f"{agent.name} sub-budget",
                ),
            )
        except InvocationError as exc:
            if exc.remote_code != budget.BUDGET_EXISTS_ERROR:  # a redelivered start made it
                raise

    def handoff(
        self, agent: AgentDefinition
    ) -> Callable[[_HandoffRequest, CallContext | None], Awaitable[_HandoffReply]]:
        async def call(request: _HandoffRequest, context: CallContext | None) -> _HandoffReply:
            provider, model = self._model_of(agent)
            target = HandoffTarget(
                agent=agent.name,
                provider=provider,
                model=model,
                instructions=self._instructions(agent),
                tools=list(agent.tools),
            )
            text = f"Handed the conversation to the {agent.name} agent; it answers from now on."
            return _HandoffReply(
                content=[TextBlock(text=text)],
                details={"handoff": target.model_dump(mode="json")},
            )

        return call


async def _start(ctx: WorkerContext[AgentsConfig]) -> None:
    agents = Agents(ctx)

    async def forget(session_id: str) -> dict[str, int]:
        """A deleted child session's link to its parent call."""
        return {"links": int(await ctx.engine.delete_state(LINKS_SCOPE, session_id))}

    await forget_deleted_sessions(ctx, forget)
    for agent in ctx.config.agents:
        await register_tool(
            ctx,
            f"{AGENT_PREFIX}{agent.name}",
            agents.subagent(agent),
            request_model=SubagentRequest,
            response_model=SubagentReply,
            description=agent.summary(),
            idempotent=True,
            parallel=True,
            traits=ToolTraits(
                idempotent=True, parallel=True, subagent=True, timeout=SUBAGENT_TIMEOUT
            ),
        )
        await register_tool(
            ctx,
            f"{HANDOFF_PREFIX}{agent.name}",
            agents.handoff(agent),
            request_model=_HandoffRequest,
            response_model=_HandoffReply,
            description=f"Hand the conversation to the {agent.name} agent: {agent.summary()}",
            idempotent=True,
            parallel=False,
            traits=ToolTraits(idempotent=True, read_only=True, handoff=True),
        )


WORKER = WorkerSpec(
    name="agents",
    description="Agents offered to other agents: agent::<name> (subagents), handoff::<name>.",
    config_model=AgentsConfig,
    start=_start,
)


def _task(text: str, context: CallContext) -> UserMessage:
    """The child's task, labelled as the context its parent wrote it in: a task a parent wrote
    after reading untrusted content is itself untrusted."""
    task = UserMessage.text(text)
    task.label = joined([context.context_label])
    return task
