"""Provisioning: which functions the model may call, and the system prompt.

Tools are the catalog's functions matching the run's ``tools`` patterns; the catalog gives each
one's description and request schema (with its ``x-tackroom`` traits). The system prompt is the
run's ``system_prompt`` verbatim when given, else the identity preamble, the mode paragraph and the
working directory, read from the data files in ``prompts/``.
"""

from __future__ import annotations

import fnmatch
from importlib import resources

from tackroom.contracts.provider import ToolNames
from tackroom.contracts.tools import traits_of
from tackroom.engine.protocol import Engine, FunctionInfo
from tackroom.workers.orchestrator.record import ToolOffer, TurnRecord
from tackroom.workers.orchestrator.transition import Provisioned

__all__ = ["NEVER_OFFERED", "Provisioner", "prompt_piece"]

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
)
"""Functions no model may be handed as a tool, whatever a run's patterns say."""


def prompt_piece(name: str) -> str:
    return (resources.files(__package__) / "prompts" / f"{name}.md").read_text().strip()


class Provisioner:
    def __init__(self, engine: Engine, *, cwd: str | None) -> None:
        self._engine = engine
        self._cwd = cwd

    async def provision(self, record: TurnRecord) -> Provisioned:
        tools = offered_tools(await self._engine.list_functions(), record.tool_patterns)
        if record.system_prompt_override is not None:
            prompt = record.system_prompt_override
        else:
            pieces = [prompt_piece("identity"), prompt_piece(f"mode_{record.mode}")]
            if self._cwd:
                pieces.append(f"Working directory: {self._cwd}")
            prompt = "\n\n".join(pieces)
        return Provisioned(system_prompt=prompt, tools=tools)


def offered_tools(catalog: list[FunctionInfo], patterns: list[str]) -> list[ToolOffer]:
    """One offer per function id matching ``patterns`` and not in :data:`NEVER_OFFERED`."""
    chosen: dict[str, FunctionInfo] = {}
    for info in sorted(catalog, key=lambda f: f.function_id):
        if info.function_id in chosen or _matches(info.function_id, NEVER_OFFERED):
            continue
        if _matches(info.function_id, patterns):
            chosen[info.function_id] = info
    names = ToolNames(chosen)
    return [
        ToolOffer(
            name=names.name(function_id),
            function_id=function_id,
            description=info.description,
            parameters=_parameters(info),
            traits=traits_of(info.request_schema),
        )
        for function_id, info in chosen.items()
    ]


def _matches(function_id: str, patterns: list[str] | tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(function_id, pattern) for pattern in patterns)


def _parameters(info: FunctionInfo) -> dict[str, object]:
    schema = dict(info.request_schema or {"type": "object", "properties": {}})
    schema.setdefault("type", "object")
    return schema
