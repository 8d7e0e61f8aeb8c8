"""The orchestrator worker: ``run::start``, ``run::abort``, ``turn::get_state`` and the driver."""

from __future__ import annotations

import logging
import os
import uuid
from typing import Any

from pydantic import Field, field_validator

from tackroom.contracts.approvals import DECISIONS_SCOPE
from tackroom.contracts.context import COMPACT, ContextSettings
from tackroom.contracts.events import EVENTS, TURN_END
from tackroom.contracts.guards import LoopGuard
from tackroom.contracts.results import MAX_PAGE_CHARS, RESULTS_READ
from tackroom.contracts.tools import OnPolicyError
from tackroom.contracts.turn import (
    RUN_ABORT,
    RUN_START,
    TURN_GET_STATE,
    TURN_ON_APPROVAL,
    TURN_STEP,
    TURN_STEP_QUEUE,
    ModelRef,
    RunAbortRequest,
    RunAbortResponse,
    RunStartRequest,
    RunStartResponse,
    TurnStateRequest,
    TurnStateView,
    parse_model_chain,
)
from tackroom.engine.errors import FunctionError, RevisionConflict
from tackroom.engine.protocol import QueueConfig, StreamRetention
from tackroom.engine.trace_context import trace_headers
from tackroom.kit.forgetting import forget_deleted_sessions
from tackroom.kit.hooks.modelcalls import ModelCallHooks
from tackroom.kit.hooks.publish import HookSubscriptions
from tackroom.kit.lifecycle import install_lifecycle_logging
from tackroom.runtime.tools import serve_tool
from tackroom.runtime.worker import WorkerConfig, WorkerContext, WorkerSpec
from tackroom.workers.orchestrator.aborts import AbortWatch
from tackroom.workers.orchestrator.clipping import DEFAULT_MAX_RESULT_CHARS, MIN_RESULT_CHARS
from tackroom.workers.orchestrator.context import ContextAssembler
from tackroom.workers.orchestrator.dispatch import Dispatcher
from tackroom.workers.orchestrator.driver import Driver
from tackroom.workers.orchestrator.flow import FlowIndex
from tackroom.workers.orchestrator.forgetting import forget_session
from tackroom.workers.orchestrator.gate import Gate
from tackroom.workers.orchestrator.holds import refuse_if_held, serve_holds
from tackroom.workers.orchestrator.modelcall import ModelCall, ProfileCache
from tackroom.workers.orchestrator.models import ModelInfoCache
from tackroom.workers.orchestrator.planned import Planner
from tackroom.workers.orchestrator.provision import Provisioner
from tackroom.workers.orchestrator.record import RUNS_SCOPE, TURNS_SCOPE, TurnRecord, runs_key
from tackroom.workers.orchestrator.results import ResultsReader
from tackroom.workers.orchestrator.spend import BudgetGuard, leads_of
from tackroom.workers.orchestrator.streaming import ModelCaller
from tackroom.workers.orchestrator.structured import DEFAULT_OUTPUT_RETRIES, output_spec
from tackroom.workers.orchestrator.subagents import Subagents
from tackroom.workers.orchestrator.transcript import SessionsClient
from tackroom.workers.orchestrator.wake import wake

__all__ = ["WORKER", "OrchestratorConfig"]

_log = logging.getLogger("tackroom.orchestrator")


class OrchestratorConfig(WorkerConfig):
    policy_function: str | None = None
    """e.g. ``policy::check_permissions``; ``None`` runs thin (every call allowed)."""
    policy_timeout: float = 5.0
    policy_on_error: OnPolicyError = "deny"
    """When the policy function fails (error, timeout, unreadable answer): ``deny`` (closed) or
    ``allow`` (open, audited as ``decided_by: fail_open``); a tool's ``on_policy_error`` wins."""
    approvals_function: str | None = None
    """e.g. ``approval::request``: asked before a call parks (the session's mode may allow it)."""
    budget_check_function: str | None = None
    """e.g. ``budget::check``: reserves each model call's estimate; ``None``: no budget."""
    budget_record_function: str | None = None
    """e.g. ``budget::record``: settles the reservation with the actual cost."""
    budget_workspace: str | None = None
    """Workspace id charged with this harness's model calls (budgets of scope workspace/<id>)."""
    budget_agent: str | None = None
    """Agent id charged with the model calls of runs that name no agent (scope agent/<id>)."""
    hooks_function: str | None = None
    """e.g. ``hook-fanout::publish_collect``: hooks around calls, model calls and turn ends."""
    provider_timeout: float = 300.0
    """Seconds for one model call, provider retries included (not 30: docs/defaults.md)."""
    call_timeout: float = 15.0
    """Seconds for one call of a tool without a ``timeout`` trait (seed 003)."""
    tool_retries: int = Field(default=1, ge=0, le=3)
    """Retries of an idempotent tool's call after a transient error (seed 003: one)."""
    loop_guard: LoopGuard = Field(default_factory=LoopGuard)
    """The same tool too many turns in a row, the same call too often (contracts/guards.py)."""
    coalesce_seconds: float = 0.05
    coalesce_chars: int = 4096
    cwd: str | None = None
    step_visibility_timeout: float = 60.0
    max_result_chars: int = Field(
        default=DEFAULT_MAX_RESULT_CHARS, ge=MIN_RESULT_CHARS, le=MAX_PAGE_CHARS
    )
    """Characters of one function result the model reads whole (a tool's ``max_result_chars``
    trait overrides it); a larger one reaches it clipped, the rest through ``results::read``,
    whose pages are this long by default. The session always keeps the whole result."""
    context: ContextSettings = Field(default_factory=ContextSettings)
    """The context budget of runs that bring none (``agent.context`` in ``tackroom.yaml``)."""
    compaction_function: str | None = COMPACT.id
    """Who summarises history that does not fit (``None``: such a run fails with
    ``context_overflow``)."""
    events_retention_days: float | None = Field(default=None, gt=0)
    """Days ``agent::events`` keeps a run's events (the engine trims older ones); ``None``: kept.
    The audit log keeps the security-relevant facts for its own retention."""
    events_max_per_session: int | None = Field(default=None, ge=100)
    """Events kept at most per session (the oldest go first); ``None``: no limit."""
    routes: dict[str, list[ModelRef]] = Field(default_factory=dict)
    """Task tag → model chain (``"openai:gpt-5-mini -> anthropic:claude-haiku-4-5"``): a run
    whose ``task`` names a route runs on that chain instead of its own model and fallbacks."""
    text_corrections: int = Field(default=2, ge=0, le=10)
    """Corrections a ``tool_calling: text`` model gets when its tool call cannot be read."""
    output_retries: int = Field(default=DEFAULT_OUTPUT_RETRIES, ge=0, le=10)
    """Corrective model calls a run with an ``output_schema`` gets when its answer does not
    validate (a run's ``output_retries`` overrides it); see ``structured.py`` for the reason."""
    max_subagent_fanout: int = Field(default=8, ge=1, le=256)
    max_external_calls: int | None = Field(default=50, ge=0)
    """Calls of tools with external effects (``side_effect: external``: a message sent, a
    request made) one run may make; past it the gate denies them (``decided_by: cap``). A bound
    on the damage of a run that containment did not stop. ``None``: no bound."""
    """Subagent calls (``agent::<name>``) one model message may make; the rest are refused."""
    max_deliveries: int = 50
    """Only an engine that is away fails a ``turn-step`` delivery (anything else fails the turn
    with its reason), so a step is retried through an outage of minutes (backoff to 10 s)
    before it is dead-lettered."""

    @field_validator("routes", mode="before")
    @classmethod
    def _chains(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        return {
            task: parse_model_chain(chain) if isinstance(chain, str) else chain
            for task, chain in value.items()
        }


class Orchestrator:
    def __init__(
        self, ctx: WorkerContext[OrchestratorConfig], *, hooks: HookSubscriptions | None
    ) -> None:
        config = ctx.config
        self._routes = config.routes
        self._loop_guard = config.loop_guard
        self._output_retries = config.output_retries
        self._engine = ctx.engine
        self._sessions = SessionsClient(ctx.engine)
        models = ModelInfoCache(ctx.engine)
        self.results = ResultsReader(self._sessions, page_chars=config.max_result_chars)
        flows = FlowIndex(self._sessions)
        subagents = Subagents(
            ctx.engine,
            sessions=self._sessions,
            flows=flows,
            max_fanout=config.max_subagent_fanout,
            timeout=config.call_timeout,
        )
        gate = Gate(
            ctx.engine,
            policy_function=config.policy_function,
            approvals_function=config.approvals_function,
            timeout=config.policy_timeout,
            hooks=hooks,
            on_error=config.policy_on_error,
            max_external_calls=config.max_external_calls,
        )
        self.aborts = AbortWatch(ctx.engine)
        self._driver = Driver(
            ctx.engine,
            aborts=self.aborts,
            sessions=self._sessions,
            provisioner=Provisioner(
                ctx.engine,
                cwd=config.cwd or os.getcwd(),
                planner=Planner(
                    ctx.engine, sessions=self._sessions, timeout=config.provider_timeout
                ),
            ),
            model=ModelCall(
                ModelCaller(
                    ctx.engine,
                    timeout=config.provider_timeout,
                    coalesce_seconds=config.coalesce_seconds,
                    coalesce_chars=config.coalesce_chars,
                ),
                hooks=ModelCallHooks(hooks),
                profiles=ProfileCache(ctx.engine),
                models=models,
                text_corrections=config.text_corrections,
            ),
            dispatcher=Dispatcher(
                ctx.engine,
                gate=gate,
                call_timeout=config.call_timeout,
                subagents=subagents,
                flows=flows,
                tool_retries=config.tool_retries,
            ),
            subagents=subagents,
            hooks=hooks,
            context=ContextAssembler(
                ctx.engine,
                sessions=self._sessions,
                models=models,
                defaults=config.context,
                default_result_limit=config.max_result_chars,
                compaction_function=config.compaction_function,
            ),
            budget=BudgetGuard(
                ctx.engine,
                check_function=config.budget_check_function,
                record_function=config.budget_record_function,
                workspace=config.budget_workspace,
                agent=config.budget_agent,
                models=models,
            ),
            visibility_extension=config.step_visibility_timeout,
        )

    async def run_start(self, request: RunStartRequest, *, retries: int = 3) -> RunStartResponse:
        sid = request.session_id
        await refuse_if_held(self._engine, request.principal, sid)  # the kill switch
        existing = await self._engine.get_state(TURNS_SCOPE, sid)
        if existing is not None:
            current = TurnRecord.model_validate(existing.value)
            if request.run_id is not None and current.run_id == request.run_id:
                # A client retrying a start whose reply it lost (or that failed after the
                # commit): the run exists; make sure it is moving, and start nothing new.
                if not current.terminal:
                    await wake(self._engine, sid, current.run_id)
                return RunStartResponse(
                    session_id=sid, started=True, run_id=current.run_id, resumed=True
                )
            if not current.terminal:
                return await self._busy(request, current)
            await self._driver.settle(current)
            await self._keep_finished(current)
        run_id = request.run_id or f"run-{uuid.uuid4().hex[:12]}"
        await self._sessions.ensure(sid)
        primary, *fallbacks = self._chain(request)
        record = TurnRecord(
            session_id=sid,
            run_id=run_id,
            provider=primary.provider,
            model=primary.model,
            fallbacks=fallbacks,
            mode=request.mode,
            principal=request.principal,
            agent=request.agent,
            parent=request.parent,
            leads=[] if request.parent is None else await leads_of(self._engine, request.parent),
            max_turns=request.max_turns,
            system_prompt_override=request.system_prompt,
            instructions=request.instructions,
            tool_patterns=request.tools,
            initial_messages=request.messages,
            context=request.context,
            loop_guard=self._loop_guard,
            output=output_spec(request, default_retries=self._output_retries),
            tool_timeout=request.tool_timeout,
            trace_context=trace_headers(),
        )
        try:
            # The record and its first step: one transaction where the engine can (a start
            # that lost the compare-and-set enqueues nothing); elsewhere in this order.
            async with self._engine.transaction():
                await self._engine.set_state(
                    TURNS_SCOPE,
                    sid,
                    record.model_dump(mode="json"),
                    expected_revision=0 if existing is None else existing.revision,
                )
                await wake(self._engine, sid, run_id)
        except RevisionConflict:
            latest = await self._engine.get_state(TURNS_SCOPE, sid)
            if latest is not None:
                replaced = TurnRecord.model_validate(latest.value)
                if replaced.terminal and replaced.run_id != run_id and retries > 0:
                    # The finished run was written meanwhile (on NATS its applied outbox is
                    # cleared after agent_end): start again against it, not "busy".
                    return await self.run_start(request, retries=retries - 1)
                return await self._busy(request, replaced)
            raise
        return RunStartResponse(session_id=sid, started=True, run_id=run_id)

    async def _keep_finished(self, record: TurnRecord) -> None:
        """Keep the final record of a run the next one replaces: a replay of it needs its system
        prompt and tools (``tackroom replay``). Written before the replacement: the same value
        again is harmless."""
        kept = record.model_copy(update={"outbox": [], "inbox_taken": {}})
        await self._engine.set_state(
            RUNS_SCOPE, runs_key(record.session_id, record.run_id), kept.model_dump(mode="json")
        )

    def _chain(self, request: RunStartRequest) -> list[ModelRef]:
        """The route the run's task names, else the request's model and fallbacks."""
        route = self._routes.get(request.task) if request.task is not None else None
        if route:
            return list(route)
        return [ModelRef(provider=request.provider, model=request.model), *request.fallbacks]

    async def _busy(self, request: RunStartRequest, current: TurnRecord) -> RunStartResponse:
        reason = f"session_busy: run {current.run_id} is in state {current.state}"
        if request.if_busy == "queue":
            for message in request.messages:
                await self._sessions.push(request.session_id, "followup", message)
            return RunStartResponse(
                session_id=request.session_id,
                started=False,
                queued=True,
                run_id=current.run_id,
                reason=reason,
            )
        return RunStartResponse(session_id=request.session_id, started=False, reason=reason)

    async def run_abort(self, request: RunAbortRequest) -> RunAbortResponse:
        entry = await self._engine.get_state(TURNS_SCOPE, request.session_id)
        if entry is None:
            return RunAbortResponse(session_id=request.session_id, aborted=False)
        record = TurnRecord.model_validate(entry.value)
        if record.terminal:
            return RunAbortResponse(
                session_id=request.session_id, aborted=False, state=record.state
            )
        await self.aborts.request(request.session_id, record.run_id, request.reason)
        await wake(self._engine, request.session_id, record.run_id, trace=record.trace_context)
        return RunAbortResponse(session_id=request.session_id, aborted=True, state=record.state)

    async def get_state(self, request: TurnStateRequest) -> TurnStateView | None:
        entry = await self._engine.get_state(TURNS_SCOPE, request.session_id)
        return None if entry is None else TurnRecord.model_validate(entry.value).view()

    async def step(self, payload: Any) -> None:
        if not isinstance(payload, dict) or not isinstance(payload.get("session_id"), str):
            raise FunctionError("invalid_request", f"{TURN_STEP} takes {{session_id, run_id}}")
        await self._driver.drive(payload["session_id"], str(payload.get("run_id", "")))

    async def on_approval(self, payload: Any) -> None:
        """State trigger on the approvals decisions: wake the run that parked the call (one drive
        pass)."""
        key = str(payload.get("key", "")) if isinstance(payload, dict) else ""
        session_id = key.split("/", 1)[0]
        if not session_id or payload.get("new_value") is None:
            return
        entry = await self._engine.get_state(TURNS_SCOPE, session_id)
        if entry is None:
            return
        record = TurnRecord.model_validate(entry.value)
        if record.state == "function_awaiting_approval":
            await wake(self._engine, session_id, record.run_id, trace=record.trace_context)

    async def recover(self) -> None:
        """Wake every unfinished run: one left mid-step (a crash between commit and enqueue), or
        parked while a decision was written with no orchestrator running — and, where a commit
        and its effects are not one transaction, every finished run whose last outbox is still
        there: a crash came between its final commit and the outbox's clearing, so its
        ``agent_end`` may be missing, and would otherwise wait for the lost delivery's lease.

        Waking a run twice is harmless: a stale drive changes nothing.
        """
        for entry in await self._engine.list_state(TURNS_SCOPE):
            record = TurnRecord.model_validate(entry.value)
            unsettled = bool(record.outbox) and not self._engine.atomic_transactions
            if not record.terminal or unsettled:
                await wake(
                    self._engine, record.session_id, record.run_id, trace=record.trace_context
                )


async def start(ctx: WorkerContext[OrchestratorConfig]) -> None:
    install_lifecycle_logging()  # every record made in a step says its lifecycle: once a process
    hooks = None
    if ctx.config.hooks_function is not None:
        hooks = HookSubscriptions(ctx.engine, publish_function=ctx.config.hooks_function)
        await hooks.attach(ctx)  # topics nobody subscribes to then cost no round trip at all
    orchestrator = Orchestrator(ctx, hooks=hooks)
    await ctx.engine.configure_queue(
        TURN_STEP_QUEUE,
        QueueConfig(
            max_deliveries=ctx.config.max_deliveries,
            visibility_timeout=ctx.config.step_visibility_timeout,
            backoff_initial=0.2,
            backoff_max=10.0,
            concurrency=256,
        ),
    )
    await _keep_events(ctx)
    ctx.spawn(orchestrator.aborts.follow(), name="abort-notices")
    await ctx.serve(RUN_START, orchestrator.run_start)
    await ctx.serve(RUN_ABORT, orchestrator.run_abort)
    await serve_holds(ctx, orchestrator.run_abort)
    await ctx.serve(TURN_GET_STATE, orchestrator.get_state)
    await serve_tool(ctx, RESULTS_READ, orchestrator.results.read)
    await ctx.register_function(
        TURN_ON_APPROVAL,
        orchestrator.on_approval,
        description="Wake a turn parked for approval.",
        hop=True,
    )
    await ctx.add_state_trigger(DECISIONS_SCOPE.name, TURN_ON_APPROVAL)
    await forget_deleted_sessions(ctx, lambda session_id: forget_session(ctx, session_id))

    async def serve_steps() -> None:
        # Steps (a redelivered one included) run only once the provider and tool workers
        # booted with us are live: a resumed model call must find its provider.
        # A hop in traces: each step the delivery drives is a span of its own (driver).
        await ctx.register_function(
            TURN_STEP, orchestrator.step, description="Drive a session's turn.", hop=True
        )
        await orchestrator.recover()

    ctx.after_start(serve_steps)


async def _keep_events(ctx: WorkerContext[OrchestratorConfig]) -> None:
    """The event streams' retention, when the config sets one."""
    days, most = ctx.config.events_retention_days, ctx.config.events_max_per_session
    if days is None and most is None:
        return
    retention = StreamRetention(max_age=None if days is None else days * 86400.0, max_len=most)
    for stream in (EVENTS.name, TURN_END.name):
        await ctx.engine.configure_stream(stream, retention)


WORKER = WorkerSpec(
    name="orchestrator",
    description="The durable agent turn: run::start, run::abort, turn::get_state.",
    config_model=OrchestratorConfig,
    start=start,
)
