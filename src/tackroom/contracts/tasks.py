"""The ``tasks`` worker's public face: declarative task graphs, their runs, and the functions.

A **graph** (:class:`GraphSpec`, usually read from a ``tasks.yaml``) is a list of steps; each step
is one of a function call on the bus (``call``), an agent run (``agent``) or a sub-graph
(``graph``), with ``depends_on``, ``input`` (templates referring to earlier outputs as
``${steps.ID.output.FIELD}``), ``retry``, ``timeout``, ``requires_approval``, ``when`` and
``for_each``. See ``docs/workers/tasks.md``.

A **run** is one execution of a graph: its record (:data:`RUNS_SCOPE`, key = run id) holds the
state of every step instance and is only ever written with compare-and-set, so every step's
completion is one atomic commit and a crash resumes where the last commit left the run. The
graph itself is stored once per run (:data:`GRAPHS_SCOPE`), so a resumed run never re-reads the
file. Failures arrive as ``InvocationError`` whose ``remote_code`` is one of the ``*_ERROR``
codes below.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tackroom.contracts._base import Lenient as _Record
from tackroom.contracts._base import Strict as _Request
from tackroom.contracts.agentconfig import AgentConfig
from tackroom.contracts.bus import Function, Scope

__all__ = [
    "ACTIVE_INSTANCE",
    "CANCEL",
    "GRAPHS_SCOPE",
    "GRAPH_ERROR",
    "INPUTS_ERROR",
    "LIST",
    "NOT_FOUND_ERROR",
    "ON_APPROVAL",
    "PAUSE",
    "RERUN",
    "RESUME",
    "RUN",
    "RUNS_SCOPE",
    "SCHEMA_VERSION",
    "STATUS",
    "STEP",
    "STEP_ID_PATTERN",
    "STEP_QUEUE",
    "TERMINAL_RUN",
    "TERMINAL_STEP",
    "AgentSpec",
    "ControlRequest",
    "ControlResponse",
    "GraphSpec",
    "Instance",
    "InstanceStatus",
    "ListRequest",
    "ListResponse",
    "ParentRef",
    "RerunRequest",
    "RetrySpec",
    "RunStatus",
    "RunSummary",
    "StatusRequest",
    "StepDelivery",
    "StepRecord",
    "StepSpec",
    "StepStatus",
    "TaskRun",
    "TaskRunRequest",
    "TaskRunResponse",
    "Wake",
    "approval_call_id",
    "approval_session",
    "cron_function",
]

SCHEMA_VERSION = 1

GRAPH_ERROR = "invalid_graph"
"""The graph does not validate (unknown reference, cycle, bad field): nothing was started."""
INPUTS_ERROR = "invalid_inputs"
"""A required input is missing, or an input the graph does not declare was given."""
NOT_FOUND_ERROR = "not_found"
"""No run (or no step of the run) by that id."""

STEP_ID_PATTERN = r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$"
"""Step ids: a letter or ``_`` first, then letters, digits, ``_`` and ``-``; no ``.`` (an
instance of a fanned-out step is ``STEP.INDEX``)."""
RUN_ID_PATTERN = r"^[A-Za-z0-9_:@-][A-Za-z0-9_.:@-]{0,119}$"

STEP = "tasks::step"
"""The worker's own step function, fed by queue :data:`STEP_QUEUE`; nobody else calls it."""
ON_APPROVAL = "tasks::on_approval"
"""The worker's state trigger on the approvals decisions scope; nobody else calls it."""
STEP_QUEUE = "tasks"


def cron_function(index: int) -> str:
    """The function id the worker serves for its ``index``-th configured schedule."""
    return f"tasks::cron::{index}"


def approval_session(run_id: str) -> str:
    """The approvals ``session_id`` of a run's steps."""
    return f"tasks.{run_id}"


def approval_call_id(instance_id: str, epoch: int) -> str:
    """The approvals ``function_call_id`` of a step instance: its id (``INSTANCE@EPOCH`` after
    a re-run, so a re-run asks again)."""
    return instance_id if epoch == 0 else f"{instance_id}@{epoch}"


class _Spec(BaseModel):
    # Built at first use: every harness boots this worker, few runs use a graph.
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


# -- the graph ---------------------------------------------------------------------------------


class RetrySpec(_Spec):
    attempts: int = Field(default=1, ge=1, le=100, description="attempts in all (1: no retry)")
    backoff: float = Field(default=0.0, ge=0, le=3600, description="seconds before attempt 2")
    factor: float = Field(default=2.0, ge=1, le=10, description="the delay grows by this")
    max_backoff: float = Field(default=300.0, ge=0, le=3600)
    on_errors: list[str] = Field(
        default_factory=lambda: ["*"],
        description="error classes retried: timeout, unavailable, not_found, invalid_output,"
        " agent_failed, or a function's error code (internal, …); * = any",
    )

    def delay(self, attempt: int) -> float:
        """Seconds to wait before ``attempt`` (2, 3, …)."""
        return min(self.max_backoff, self.backoff * self.factor ** max(0, attempt - 2))

    def retries(self, error_class: str) -> bool:
        return "*" in self.on_errors or error_class in self.on_errors


class AgentSpec(_Spec):
    prompt: str = Field(min_length=1, description="a template: ${...} references are filled in")
    model: str | None = Field(
        default=None, description="PROVIDER:MODEL; default: the graph's model, then the run's"
    )
    tools: list[str] | None = Field(
        default=None,
        description="function ids or globs; default: agent_config.tool_names, else none",
    )
    instructions: str | None = None
    output_schema: dict[str, Any] | None = Field(
        default=None, description="the answer must be one JSON value valid against this schema"
    )
    max_turns: int | None = Field(
        default=None, ge=1, le=1000, description="default: agent_config.max_iterations, else 8"
    )
    agent_config: AgentConfig | None = Field(
        default=None,
        description="the agent's configuration (model_backend, system_prompt, max_iterations,"
        " context_window_limit, tool_names, ...); the fields above, when given, win over it",
    )


class StepSpec(_Spec):
    id: str = Field(pattern=STEP_ID_PATTERN)
    call: str | None = Field(default=None, min_length=1, description="a function id")
    agent: AgentSpec | None = None
    graph: GraphSpec | None = Field(default=None, description="a sub-graph (its file, inlined)")
    input: Any = Field(default=None, description="call payload / sub-graph inputs (templates)")
    depends_on: list[str] = Field(default_factory=list)
    retry: RetrySpec = Field(default_factory=RetrySpec)
    timeout: float | None = Field(default=None, gt=0, le=86_400, description="per attempt")
    requires_approval: bool = False
    when: str | None = Field(default=None, description="a condition; false: the step is skipped")
    for_each: Any = Field(default=None, description="a list, or a ${...} reference to one")
    concurrency: int = Field(default=4, ge=1, le=1000, description="of a for_each fan-out")

    @model_validator(mode="after")
    def _one_kind(self) -> StepSpec:
        kinds = [k for k in ("call", "agent", "graph") if getattr(self, k) is not None]
        if len(kinds) != 1:
            raise ValueError(
                f"step {self.id!r} must have exactly one of call, agent, graph"
                f" (has {', '.join(kinds) or 'none'})"
            )
        return self

    @property
    def kind(self) -> Literal["call", "agent", "graph"]:
        return "call" if self.call is not None else "agent" if self.agent is not None else "graph"


class GraphSpec(_Spec):
    schema_version: int = SCHEMA_VERSION
    name: str = Field(default="graph", min_length=1, max_length=100)
    description: str = ""
    model: str | None = Field(default=None, description="default model of its agent steps")
    inputs: dict[str, Any] = Field(
        default_factory=dict, description="input name → default (null: required)"
    )
    steps: list[StepSpec] = Field(min_length=1, max_length=10_000)
    outputs: dict[str, Any] = Field(default_factory=dict, description="templates over steps")
    concurrency: int = Field(default=16, ge=1, le=1000, description="step instances at once")

    def step(self, step_id: str) -> StepSpec:
        for step in self.steps:
            if step.id == step_id:
                return step
        raise KeyError(step_id)


# -- a run -------------------------------------------------------------------------------------

RunStatus = Literal["running", "paused", "cancelled", "succeeded", "failed"]
TERMINAL_RUN: frozenset[str] = frozenset({"cancelled", "succeeded", "failed"})
StepStatus = Literal["waiting", "active", "succeeded", "failed", "skipped"]
InstanceStatus = Literal[
    "pending", "queued", "awaiting_approval", "in_child", "succeeded", "failed"
]
TERMINAL_STEP: frozenset[str] = frozenset({"succeeded", "failed", "skipped"})
ACTIVE_INSTANCE: frozenset[str] = frozenset({"queued", "awaiting_approval", "in_child"})
"""An instance under way (it counts against the concurrency limits)."""


class Instance(_Record):
    """One execution unit: a step, or one item of a fanned-out step (``STEP.INDEX``)."""

    status: InstanceStatus = "pending"
    attempt: int = 0
    """The attempt queued or running (1, 2, …); 0 while pending."""
    epoch: int = 0
    """The run's epoch when created (a re-run starts a new one): part of the idempotency key."""
    not_before: float | None = None
    output: Any = None
    error: str | None = None
    error_class: str | None = None
    child_run: str | None = None
    started_at: float | None = None
    ended_at: float | None = None


class StepRecord(_Record):
    status: StepStatus = "waiting"
    count: int | None = None
    """Items of a ``for_each`` step once expanded (its instances are ``STEP.0`` …)."""
    items: list[Any] | None = None
    reason: str | None = None


class ParentRef(_Record):
    run_id: str
    instance: str
    attempt: int


class TaskRun(_Record):
    """``task-runs/<run_id>``: where a run stands. Written only with compare-and-set."""

    schema_version: int = SCHEMA_VERSION
    run_id: str
    graph_name: str
    source: str | None = None
    status: RunStatus = "running"
    inputs: dict[str, Any] = Field(default_factory=dict)
    model: str | None = None
    steps: dict[str, StepRecord] = Field(default_factory=dict)
    instances: dict[str, Instance] = Field(default_factory=dict)
    outputs: dict[str, Any] | None = None
    error: str | None = None
    epoch: int = 0
    wake: int = 0
    """Grows on resume, so re-enqueued steps get dedupe keys of their own."""
    parent: ParentRef | None = None
    created_at: float
    updated_at: float
    finished_at: float | None = None

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL_RUN


Wake = Literal["run", "approval", "child"]


class StepDelivery(_Record):
    """The payload of :data:`STEP` on :data:`STEP_QUEUE`."""

    schema_version: int = SCHEMA_VERSION
    run_id: str
    instance: str
    attempt: int
    wake: Wake = "run"
    """``approval``/``child``: a wake-up for an instance parked on that (nothing else)."""


# -- requests ----------------------------------------------------------------------------------


class TaskRunRequest(_Request):
    schema_version: int = SCHEMA_VERSION
    graph: GraphSpec
    inputs: dict[str, Any] = Field(default_factory=dict)
    run_id: str | None = Field(default=None, pattern=RUN_ID_PATTERN)
    source: str | None = Field(default=None, description="where the graph came from (shown)")
    model: str | None = Field(default=None, description="default model of agent steps")


class TaskRunResponse(_Record):
    schema_version: int = SCHEMA_VERSION
    run_id: str
    created: bool
    """False: a run with this id existed already (a retried start is idempotent)."""
    status: RunStatus


class _RunRequest(_Request):
    schema_version: int = SCHEMA_VERSION
    run_id: str


class StatusRequest(_RunRequest):
    pass


class ControlRequest(_RunRequest):
    reason: str | None = None


class RerunRequest(_RunRequest):
    step: str = Field(pattern=STEP_ID_PATTERN)


class ControlResponse(_Record):
    schema_version: int = SCHEMA_VERSION
    run_id: str
    status: RunStatus
    changed: bool


class ListRequest(_Request):
    schema_version: int = SCHEMA_VERSION
    status: RunStatus | None = None


class RunSummary(_Record):
    run_id: str
    graph_name: str
    status: RunStatus
    created_at: float
    finished_at: float | None = None


class ListResponse(_Record):
    schema_version: int = SCHEMA_VERSION
    runs: list[RunSummary]


# -- state and functions -----------------------------------------------------------------------

RUNS_SCOPE: Scope[TaskRun] = Scope("task-runs", TaskRun)
GRAPHS_SCOPE: Scope[GraphSpec] = Scope("task-graphs", GraphSpec)

RUN: Function[TaskRunRequest, TaskRunResponse] = Function(
    "tasks::run",
    TaskRunRequest,
    TaskRunResponse,
    description="Start a task graph run (idempotent by run_id); its ready steps are queued.",
)
STATUS: Function[StatusRequest, TaskRun | None] = Function(
    "tasks::status", StatusRequest, TaskRun | None, description="A run's record, or null."
)
LIST: Function[ListRequest, ListResponse] = Function(
    "tasks::list", ListRequest, ListResponse, description="Task graph runs, oldest first."
)
CANCEL: Function[ControlRequest, ControlResponse] = Function(
    "tasks::cancel", ControlRequest, ControlResponse, description="Cancel a run."
)
PAUSE: Function[ControlRequest, ControlResponse] = Function(
    "tasks::pause",
    ControlRequest,
    ControlResponse,
    description="Pause a run: steps under way finish, no new step starts.",
)
RESUME: Function[ControlRequest, ControlResponse] = Function(
    "tasks::resume", ControlRequest, ControlResponse, description="Resume a paused run."
)
RERUN: Function[RerunRequest, ControlResponse] = Function(
    "tasks::rerun",
    RerunRequest,
    ControlResponse,
    description="Run a step again, and every step after it; earlier outputs are kept.",
)
