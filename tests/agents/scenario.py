"""The subagent scenario the agents tests share (in process, and the crash child process).

A lead agent calls two subagents in one message (``agent::alpha`` and ``agent::beta``), then a
third (``agent::gamma``, with an output schema) given both answers, then answers with all three.
One :class:`~tackroom.testing.FunctionModel` plays every agent: each agent's instructions carry a
marker (``[agent:NAME]``) the model function reads from the system prompt.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from tackroom import Harness
from tackroom.contracts.agents import AgentDefinition
from tackroom.contracts.messages import AgentMessage, FunctionResultMessage, UserMessage, text_of
from tackroom.harness.models import ModelChunk, ToolCall
from tackroom.runtime import HarnessConfig
from tackroom.testing import FunctionModel, ModelInfo

__all__ = [
    "CALLS",
    "FINAL",
    "PROMPT",
    "Barrier",
    "agent_definitions",
    "answer",
    "harness_for",
    "results_by_call",
]

PROMPT = "Find alpha and beta, then combine them."
CALLS = {"alpha": "call-alpha", "beta": "call-beta", "gamma": "call-gamma"}
GAMMA_SCHEMA = {
    "type": "object",
    "properties": {"combined": {"type": "string"}},
    "required": ["combined"],
    "additionalProperties": False,
}
FINAL = "Final: ALPHA(a-task) | BETA(b-task) | combined=ALPHA(a-task)+BETA(b-task)"


def agent_definitions() -> list[AgentDefinition]:
    return [
        AgentDefinition(name="alpha", instructions="[agent:alpha] Find alpha."),
        AgentDefinition(name="beta", instructions="[agent:beta] Find beta."),
        AgentDefinition(
            name="gamma", instructions="[agent:gamma] Combine.", output_schema=GAMMA_SCHEMA
        ),
    ]


def results_by_call(messages: list[AgentMessage]) -> dict[str, FunctionResultMessage]:
    return {m.function_call_id: m for m in messages if isinstance(m, FunctionResultMessage)}


def _task(messages: list[AgentMessage]) -> str:
    users = [m for m in messages if isinstance(m, UserMessage)]
    return text_of(users[-1].content) if users else ""


class Barrier:
    """Alpha and beta each wait until both are being answered: they must run together."""

    def __init__(self, parties: int = 2) -> None:
        self.parties = parties
        self.arrived = 0
        self.event = asyncio.Event()

    async def wait(self) -> None:
        self.arrived += 1
        if self.arrived >= self.parties:
            self.event.set()
        await asyncio.wait_for(self.event.wait(), timeout=15)


AnswerFn = Callable[[list[AgentMessage], ModelInfo], Awaitable[str | list[ModelChunk]]]


def answer(*, barrier: Barrier | None = None) -> AnswerFn:
    """The model of every agent of the scenario."""

    async def respond(messages: list[AgentMessage], info: ModelInfo) -> str | list[ModelChunk]:
        prompt = info.system_prompt
        if "[agent:alpha]" in prompt or "[agent:beta]" in prompt:
            name = "alpha" if "[agent:alpha]" in prompt else "beta"
            if barrier is not None:
                await barrier.wait()
            return f"{name.upper()}({_task(messages)})"
        if "[agent:gamma]" in prompt:
            parts = json.loads(_task(messages))
            return json.dumps({"combined": f"{parts['alpha']}+{parts['beta']}"})
        return _lead(messages)

    return respond


def _lead(messages: list[AgentMessage]) -> str | list[ModelChunk]:
    results = results_by_call(messages)
    if CALLS["alpha"] not in results:
        return [
            "Asking alpha and beta.",
            ToolCall("agent__alpha", {"task": "a-task"}, id=CALLS["alpha"]),
            ToolCall("agent__beta", {"task": "b-task"}, id=CALLS["beta"]),
        ]
    alpha = text_of(results[CALLS["alpha"]].content)
    beta = text_of(results[CALLS["beta"]].content)
    if CALLS["gamma"] not in results:
        task = json.dumps({"alpha": alpha, "beta": beta})
        return [ToolCall("agent__gamma", {"task": task}, id=CALLS["gamma"])]
    gamma = results[CALLS["gamma"]]
    combined = (gamma.details or {}).get("output", {}).get("combined", "?")
    return f"Final: {alpha} | {beta} | combined={combined}"


HELPER = "[agent:helper]"


def helper_answer(messages: list[AgentMessage], info: ModelInfo) -> str | list[ModelChunk]:
    """The one-helper scenario: the lead calls ``agent::helper`` once, then answers with it."""
    if HELPER in info.system_prompt:
        return "helped"
    results = [m for m in messages if isinstance(m, FunctionResultMessage)]
    if not results:
        return [ToolCall("agent__helper", {"task": "help"}, id="call-help")]
    return "lead: " + text_of(results[0].content)


def harness_for(
    workdir: Path,
    *,
    engine: Any,
    model: FunctionModel,
    agents: list[AgentDefinition] | None = None,
    orchestrator: dict[str, Any] | None = None,
    agents_config: dict[str, Any] | None = None,
    workers: list[str] | None = None,
    tools: list[str] | None = None,
) -> Harness:
    """A harness (thin gate) on ``engine`` whose agent may call the scenario's agents."""
    sections: dict[str, dict[str, Any] | None] = {
        "files": {"workspace_root": str(workdir / "workspaces")},
        "orchestrator": {
            "cwd": str(workdir),
            "policy_function": None,
            "approvals_function": None,
            **(orchestrator or {}),
        },
    }
    if agents_config:
        sections["agents"] = agents_config
    config = HarnessConfig(
        schema_version=1, worker_config=sections, workers=["engine", *(workers or [])]
    )
    return Harness(
        model,
        config=config,
        engine=engine,
        instructions="[agent:lead] You lead.",
        tools=tools or [],
        agents=agent_definitions() if agents is None else agents,
    )
