"""Agents that work together: definitions, subagent calls (``agent::<name>``), handoffs.

An :class:`AgentDefinition` (the facade's ``Harness.agent(...)`` or ``tackroom.yaml``'s
``agents:``) is served by the ``agents`` worker as two tools:

- ``agent::<name>`` (traits ``subagent``): the calling run parks; the agents worker starts a
  **child run in a child session** (:func:`child_ids`: both ids derive from the parent's run and
  call, so a redelivered step never starts a second child) through ``run::start`` with a
  :class:`ParentLink`. When the child's run ends, the orchestrator writes its
  :class:`SubagentOutcome` to :data:`OUTCOMES_SCOPE` (key ``<parent session>/<call id>``) and
  wakes the parent (a ``turn::step`` of its session); the outcome becomes the call's result.
- ``handoff::<name>`` (traits ``handoff``): the session goes on with that agent's instructions,
  model and tools from the next model call on (:class:`HandoffTarget` in the result's details).
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from tackroom.contracts.messages import Usage
from tackroom.contracts.provenance import Label
from tackroom.contracts.tenancy import qualify, tenant_of

__all__ = [
    "AGENT_PREFIX",
    "HANDOFF_PREFIX",
    "LINKS_SCOPE",
    "NAME_PATTERN",
    "OUTCOMES_SCOPE",
    "AgentDefinition",
    "HandoffTarget",
    "ParentLink",
    "SubagentOutcome",
    "SubagentReply",
    "SubagentRequest",
    "child_ids",
    "outcome_key",
]

AGENT_PREFIX = "agent::"
HANDOFF_PREFIX = "handoff::"
NAME_PATTERN = r"^[a-z][a-z0-9_-]{0,62}$"
OUTCOMES_SCOPE = "subagent-outcomes"
"""Key ``<parent session>/<call id>``: the :class:`SubagentOutcome` of a child run that ended."""
LINKS_SCOPE = "subagent-links"
"""Key = child session id: its :class:`ParentLink` (the agents worker reads a parent's depth)."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AgentDefinition(_Model):
    """One agent another may call (``agent::<name>``) or hand the conversation to."""

    schema_version: int = 1
    name: str = Field(pattern=NAME_PATTERN)
    description: str = Field(default="", max_length=2000)
    """What the calling model reads about this agent (default: its first line of instructions)."""
    instructions: str = Field(default="", max_length=200_000)
    model: str | None = Field(default=None, pattern=r"^[a-zA-Z0-9_-]+:.+$")
    """``PROVIDER:MODEL``; ``None``: the harness's model."""
    tools: list[str] = Field(default_factory=list)
    """Function ids or globs offered to this agent (``agent::*`` lets it delegate further)."""
    output_schema: dict[str, Any] | None = None
    """A JSON schema: the child answers one JSON value, returned parsed as ``output``."""
    max_turns: int = Field(default=8, ge=1, le=1000)
    budget_usd: float | None = Field(default=None, gt=0)
    """A sub-budget: the child's session may spend this much at most (needs the budget worker)."""

    def summary(self) -> str:
        if self.description:
            return self.description
        first = self.instructions.strip().splitlines()[:1]
        return f"Ask the {self.name} agent" + (f": {first[0][:200]}" if first else "")


class SubagentRequest(_Model):
    """The arguments a model passes to ``agent::<name>``."""

    task: str = Field(min_length=1, max_length=200_000, description="what the agent is to do")


class ParentLink(_Model):
    """Where a child run came from: the parent's session, run and call, and its depth (1 for a
    child of a top-level run)."""

    schema_version: int = 1
    session_id: str
    run_id: str
    function_call_id: str
    agent: str
    depth: int = Field(ge=1)
    output_schema: dict[str, Any] | None = None


class SubagentReply(_Model):
    """What ``agent::<name>`` answers the orchestrator: the child is ``running`` (the call parks
    until its outcome is written), or the call was ``refused`` (depth, fan-out) with a reason."""

    schema_version: int = 1
    status: Literal["running", "refused"]
    agent: str
    child_session_id: str | None = None
    child_run_id: str | None = None
    reason: str | None = None


class SubagentOutcome(_Model):
    schema_version: int = 1
    agent: str
    child_session_id: str
    child_run_id: str
    state: Literal["stopped", "failed"]
    stop_reason: str | None = None
    text: str = ""
    """The child's final answer (its last assistant message's text)."""
    output: Any = None
    """The answer parsed and validated against the agent's ``output_schema``, if it has one."""
    error: str | None = None
    """Why the child did not end normally (budget, failure, max turns), in words."""
    usage: Usage = Field(default_factory=Usage)
    label: Label | None = Field(
        default=None,
        exclude_if=lambda value: value is None,
        description="the label of what the child read: its answer is no more trusted than that",
    )


class HandoffTarget(_Model):
    """What a ``handoff::<name>`` result carries in ``details["handoff"]``."""

    schema_version: int = 1
    agent: str
    provider: str
    model: str
    instructions: str
    tools: list[str]


def child_ids(parent_session: str, parent_run: str, call_id: str, agent: str) -> tuple[str, str]:
    """``(child session id, child run id)`` for a call: the same on every redelivery, and in
    the parent's tenant."""
    digest = hashlib.sha256(f"{parent_session}\0{parent_run}\0{call_id}".encode()).hexdigest()
    safe = re.sub(r"[^A-Za-z0-9_-]", "-", agent)[:40]
    child = f"sub-{safe}-{digest[:20]}"
    return qualify(tenant_of(parent_session), child), f"run-{digest[20:36]}"


def outcome_key(parent_session: str, call_id: str) -> str:
    return f"{parent_session}/{call_id}"
