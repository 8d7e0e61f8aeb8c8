"""What the orchestrator contract suite (:mod:`.orchestrator`) boots beside the orchestrator
under test: the model's script, the policy's rules and the test tools.

- :data:`SCRIPT`: the turns the :class:`~tackroom.testing.ScriptedProvider` named
  :data:`PROVIDER` answers, one sequence per test session (a call beyond it is an error);
- :data:`POLICY_RULES`: the shipped ``policy`` worker's rules (``contract-tools`` allows
  :data:`ECHO` and :data:`WAIT`, ``no-forbidden`` denies :data:`FORBIDDEN`, the default denies);
- :class:`ContractTools`: the tools, served by a worker ``contract-tools``; runs are offered
  :data:`TOOLS`;
- :func:`told_in_order`: the checks every reader of a run's ``agent::events`` relies on.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict

from tackroom.contracts.tools import CallContext
from tackroom.runtime.tools import register_tool
from tackroom.runtime.worker import WorkerConfig, WorkerContext, WorkerSpec

__all__ = [
    "ECHO",
    "FORBIDDEN",
    "MODEL",
    "POLICY_RULES",
    "PROVIDER",
    "SCRIPT",
    "TOOLS",
    "WAIT",
    "ContractTools",
    "ToolUse",
    "text_of",
    "told_in_order",
]

PROVIDER, MODEL = "scripted", "contract-model"
ECHO, WAIT, FORBIDDEN = "contract::echo", "contract::wait", "contract::forbidden"
TOOLS = ["contract::*"]

POLICY_RULES = """\
schema_version: 1
rules:
  - id: contract-tools
    function: [contract::echo, contract::wait]
    decision: allow
  - id: no-forbidden
    function: contract::forbidden
    decision: deny
    reason: the contract forbids it
"""


def _call(function_id: str, call_id: str, text: str) -> dict[str, Any]:
    return {"function_id": function_id, "arguments": {"text": text}, "id": call_id}


def _waits(session: str) -> list[dict[str, Any]]:
    return [
        {"session": session, "tool_calls": [_call(WAIT, "c-wait", "hold")]},
        {"session": session, "text": "Done waiting."},
    ]


SCRIPT: list[dict[str, Any]] = [
    {"session": "hello", "text": "Hello from the scripted model."},
    {"session": "events", "tool_calls": [_call(ECHO, "c-echo", "ping")]},
    {"session": "events", "text": "The echo said PING."},
    *_waits("state"),
    *_waits("again"),
    {"session": "abort", "tool_calls": [_call(WAIT, "c-wait", "hold")]},
    {
        "session": "gate",
        "tool_calls": [_call(ECHO, "c-echo", "ping"), _call(FORBIDDEN, "c-no", "x")],
    },
    {"session": "gate", "text": "One ran, one was refused."},
    {"session": "history", "text": "First answer."},
    {"session": "history", "text": "Second answer."},
]


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str


class _Echoed(BaseModel):
    echo: str


class _NoConfig(WorkerConfig):
    pass


@dataclass
class ToolUse:
    """One call a test tool got: its arguments and the call context (``_call``)."""

    function_id: str
    arguments: dict[str, Any]
    context: CallContext | None


@dataclass
class ContractTools:
    """Each takes ``{"text": …}``: ``contract::echo`` answers ``{"echo": TEXT}`` (upper case),
    ``contract::wait`` sets :attr:`waiting` and blocks until :attr:`release` is set,
    ``contract::forbidden`` must never run. :attr:`calls` records every call."""

    calls: list[ToolUse] = field(default_factory=list)
    waiting: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)

    def of(self, function_id: str) -> list[ToolUse]:
        return [call for call in self.calls if call.function_id == function_id]

    def worker_spec(self) -> WorkerSpec[Any]:
        async def echo(request: _Args, call: CallContext | None) -> _Echoed:
            self.calls.append(ToolUse(ECHO, request.model_dump(), call))
            return _Echoed(echo=request.text.upper())

        async def wait(request: _Args, call: CallContext | None) -> _Echoed:
            self.calls.append(ToolUse(WAIT, request.model_dump(), call))
            self.waiting.set()
            await self.release.wait()
            return _Echoed(echo="released")

        async def forbidden(request: _Args, call: CallContext | None) -> _Echoed:
            self.calls.append(ToolUse(FORBIDDEN, request.model_dump(), call))
            return _Echoed(echo="this should never run")

        async def start(ctx: WorkerContext[_NoConfig]) -> None:
            for function_id, handler in ((ECHO, echo), (WAIT, wait), (FORBIDDEN, forbidden)):
                await register_tool(
                    ctx,
                    function_id,
                    handler,
                    request_model=_Args,
                    response_model=_Echoed,
                    description=f"The orchestrator contract's {function_id}.",
                    idempotent=False,
                    parallel=False,
                )

        return WorkerSpec(
            name="contract-tools", description="Test tools.", config_model=_NoConfig, start=start
        )


def text_of(message: Any) -> str:
    """The text blocks of a message (a model or its JSON), joined."""
    content = message["content"] if isinstance(message, dict) else message.content
    return "".join(
        (block.get("text", "") if isinstance(block, dict) else getattr(block, "text", ""))
        for block in content
    )


def told_in_order(frames: list[Any], session: str, run_id: str) -> list[str]:
    """Check one run's stored ``agent::events`` frames (JSON, oldest first) as every reader relies
    on them; their types, in order. The run opens with a ``turn_state_changed`` from
    ``provisioning``, each one goes on from the state the previous one reached, the last reaches
    the state ``agent_end`` closes the run with, once; ids are unique; nothing live is stored."""
    types = [f["type"] for f in frames]
    assert {(f["session_id"], f["run_id"]) for f in frames} == {(session, run_id)}, frames
    assert len({f["event_id"] for f in frames}) == len(frames), "event ids are not unique"
    assert not {"message_update", "message_snapshot"} & set(types), "live events were stored"
    assert types[0] == "turn_state_changed", types
    assert frames[0]["data"]["from"] == "provisioning", frames[0]
    assert types[-1] == "agent_end", types
    assert types.count("agent_end") == 1, types
    reached = "provisioning"
    for change in (f["data"] for f in frames if f["type"] == "turn_state_changed"):
        assert change["from"] == reached, f"{change} does not go on from {reached}"
        reached = change["to"]
    assert reached == frames[-1]["data"]["state"], f"the last state change reached {reached}"
    return types
