"""The tool-call contract between the orchestrator and any function offered to a model.

- The orchestrator calls a function with the model's (schema-validated) arguments plus one
  reserved field, ``_call`` (:class:`CallContext`): the session and call it serves, so a tool can
  find its per-session workspace. Tools strip it with :func:`split_call`.
- A function declares how it may be run in its published request schema under ``x-tackroom``
  (:class:`ToolTraits`): ``idempotent`` (safe to retry after a crash mid-call) and ``parallel``
  (may run beside other calls of the same batch). The catalog carries schemas on every backend,
  so the orchestrator reads traits from ``engine::functions::list`` — no side channel.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tackroom.contracts.principal import Principal
from tackroom.contracts.provenance import Label, SideEffect
from tackroom.contracts.versions import renamed_before

__all__ = [
    "CALL_CONTEXT_KEY",
    "NEVER_OFFERED",
    "TRAITS_KEY",
    "TRANSIENT_ERROR_CODES",
    "CallContext",
    "OfferedTool",
    "OnPolicyError",
    "ToolTraits",
    "model_schema",
    "split_call",
    "traits_of",
    "with_traits",
]

CALL_CONTEXT_KEY = "_call"
OnPolicyError = Literal["deny", "allow"]
"""What the gate does with a call when the policy function fails: deny it (fail closed) or
allow it (fail open, audited)."""
TRAITS_KEY = "x-tackroom"

NEVER_OFFERED: tuple[str, ...] = (
    "run::*",
    "turn::*",
    "provider::*",
    "session-tree::*",
    "session-inbox::*",
    "state::*",
    "stream::*",
    "engine::*",
    "approval::*",
    "policy::*",
    "auth::*",
    "budget::*",
    "hook-fanout::*",
    "hook::*",
    "models::reconcile",
    "directory::skills::register",
    "sandbox::*",
    "mcp::servers",
    "mcp::prompts::*",
    "*::forget_session",
)
"""Function id globs (``fnmatch``) the orchestrator never hands a model as a tool, whatever a
run's patterns say: the harness's own machinery, credentials, approvals, policy, budgets, hook
subscribers, catalog reconciliation, skill registration, the workers' deleted-session cleanup
(``<worker>::forget_session``), and the sandbox's raw
``sandbox::run`` (models reach it through ``shell::run`` and ``code::python``, which the policy
names), the MCP bridge's operator status and its prompts (picked by a user, not a model)."""


TRANSIENT_ERROR_CODES: frozenset[str] = frozenset(
    {"timeout", "unavailable", "connection_failed", "rate_limited", "server_busy"}
)
"""``FunctionError`` codes that say "try again later": the orchestrator retries an idempotent
tool's call that failed with one (bounded, with backoff), and never a non-idempotent one."""


class CallContext(BaseModel):
    """What a tool call serves. Version 2 renamed ``message_id`` (the run's id) to ``run_id``; a
    version 1 context is upgraded as it is read."""

    model_config = ConfigDict(extra="ignore")

    schema_version: int = 2
    session_id: str
    function_call_id: str
    run_id: str | None = None
    principal: Principal | None = Field(
        default=None, description="who the run acts for (set by the orchestrator, never the model)"
    )
    context_label: Label | None = Field(
        default=None,
        exclude_if=lambda value: value is None,
        description="the label of the context the model asked for the call from (untrusted once"
        " it read untrusted content): a tool that stores what it is given labels it so",
    )

    @model_validator(mode="before")
    @classmethod
    def _upgrade(cls, data: Any) -> Any:
        return renamed_before(data, 2, "message_id", "run_id")


class ToolTraits(BaseModel):
    model_config = ConfigDict(extra="ignore")

    idempotent: bool = False
    parallel: bool = False
    name: str | None = None
    """The name the model sees (default: derived from the function id, ``fs::read`` →
    ``fs__read``); a name another offered tool already has gets a numeric suffix."""
    requires_approval: bool = False
    """Every call parks for a human decision, whatever the policy allows (a denial still wins)."""
    timeout: float | None = None
    """Seconds one call may take (default: the orchestrator's ``call_timeout``)."""
    read_only: bool = False
    """The call changes nothing (no file written, no command run, no request with effects):
    ``--mode plan`` runs only these, and the default policy allows them without asking."""
    required_permission: str | None = None
    """A permission the run's principal must hold (one of its ``roles`` or ``permissions``); the
    gate denies the call otherwise, before any policy rule."""
    max_result_chars: int | None = None
    """Characters of one result the model reads whole (default: the orchestrator's
    ``max_result_chars``); a larger result reaches it clipped, and whole through
    ``results::read``."""
    subagent: bool = False
    """``agent::<name>`` (:mod:`tackroom.contracts.agents`): a call starts a child run and parks
    the caller until it ends."""
    handoff: bool = False
    """``handoff::<name>``: the session goes on with another agent from the next model call."""
    on_policy_error: OnPolicyError | None = None
    """When the policy function fails for a call of this tool (an error, a timeout, an answer it
    cannot read): ``deny`` it (fail closed) or ``allow`` it (fail open: the ``gate_decision`` and
    the audit log say ``decided_by: fail_open`` and why). Default: the orchestrator's
    ``policy_on_error`` (``deny``). A protected function never fails open."""
    untrusted_output: bool = False
    """Its results hold content a third party could have written (a web page, an email, an MCP
    server's reply): they are labelled untrusted, and the gate's flow rules watch what the model
    copies out of them."""
    side_effect: SideEffect | None = None
    """What a call may change: ``none``, ``internal`` (the session's own workspace) or
    ``external`` (seen outside: a message sent, a request made). Default: ``none`` for a
    ``read_only`` tool, else ``external``."""
    sinks: list[str] = Field(default_factory=list)
    """Arguments that say where data goes (``to``, ``url``, ``recipient``) or what an action
    destroys or changes (``file_id``): the flow rules refuse such a value copied from untrusted
    content (a short one, like ``"13"``, when it stands there as a word of its own)."""

    @property
    def effect(self) -> SideEffect:
        """The declared ``side_effect``, or the default its ``read_only`` implies."""
        if self.side_effect is not None:
            return self.side_effect
        return "none" if self.read_only else "external"


class OfferedTool(BaseModel):
    """A function offered to the model in a run, under a model-safe tool ``name``: what the turn
    record keeps and a cassette replays."""

    model_config = ConfigDict(extra="forbid")

    name: str
    function_id: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=dict)
    traits: ToolTraits = Field(default_factory=ToolTraits)


def with_traits(schema: dict[str, Any], traits: ToolTraits) -> dict[str, Any]:
    """``schema`` with ``traits`` recorded under ``x-tackroom``."""
    recorded = {"idempotent": traits.idempotent, "parallel": traits.parallel}
    return {**schema, TRAITS_KEY: {**recorded, **traits.model_dump(exclude_defaults=True)}}


def model_schema(
    model: type[BaseModel],
    *,
    idempotent: bool = False,
    parallel: bool = False,
    traits: ToolTraits | None = None,
) -> dict[str, Any]:
    """The JSON schema of ``model`` as a tool's request schema, with its traits."""
    return with_traits(
        model.model_json_schema(),
        traits or ToolTraits(idempotent=idempotent, parallel=parallel),
    )


def traits_of(schema: dict[str, Any] | None) -> ToolTraits:
    raw = (schema or {}).get(TRAITS_KEY)
    return ToolTraits.model_validate(raw) if isinstance(raw, dict) else ToolTraits()


def split_call(payload: Any) -> tuple[dict[str, Any], CallContext | None]:
    """The model's arguments and the orchestrator's call context, from a tool's payload."""
    if not isinstance(payload, dict):
        return {}, None
    arguments = {key: value for key, value in payload.items() if key != CALL_CONTEXT_KEY}
    raw = payload.get(CALL_CONTEXT_KEY)
    return arguments, CallContext.model_validate(raw) if isinstance(raw, dict) else None
