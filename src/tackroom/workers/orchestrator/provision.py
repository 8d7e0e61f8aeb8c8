"""Provisioning: which functions the model may call, and the system prompt.

Tools are the catalog's functions matching the run's ``tools`` patterns; the catalog gives each
one's description and request schema (with its ``x-tackroom`` traits). The system prompt is the
run's ``system_prompt`` verbatim when given; else it is assembled from the data files in
``prompts/``: the mode paragraph, the identity preamble, the working directory, the project's
instructions (``AGENTS.md`` in the working directory, when present) and the skills index from
the directory's ``SKILLS_INDEX`` (fetched with a short timeout; no directory worker, no index).
When the index is in the prompt, the ``SKILLS_GET_TOOL`` tool is offered too, so the model can
read a skill it names.
"""

from __future__ import annotations

import asyncio
import fnmatch
import functools
import logging
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from importlib import resources
from pathlib import Path
from stat import S_ISREG
from string import Template

from pydantic import ValidationError

from tackroom.contracts.directory import SKILLS_GET_TOOL, SKILLS_INDEX, IndexRequest
from tackroom.contracts.provider import ToolNames
from tackroom.contracts.tools import NEVER_OFFERED, traits_of
from tackroom.contracts.turn import Mode
from tackroom.engine.errors import EngineError
from tackroom.engine.protocol import Engine, FunctionInfo
from tackroom.workers.orchestrator.planned import Planner
from tackroom.workers.orchestrator.record import ToolOffer, TurnRecord
from tackroom.workers.orchestrator.transition import Provisioned

__all__ = ["Provisioner", "offered_tools", "prompt_piece"]

_log = logging.getLogger("tackroom.orchestrator")


def prompt_piece(name: str, **values: str) -> str:
    """The data file ``prompts/<name>.md``, its ``$placeholders`` filled from ``values``."""
    text = _prompt_file(name)
    return Template(text).substitute(values) if values else text


@functools.cache
def _prompt_file(name: str) -> str:
    """Read once per process: the files ship with the package."""
    return (resources.files(__package__) / "prompts" / f"{name}.md").read_text().strip()


_FileStamps = tuple[tuple[int, int, int] | None, ...]
"""Per instruction file: its (inode, size, mtime in ns), or ``None`` if it is not a file."""


def _stamps(cwd: Path, names: Sequence[str]) -> _FileStamps:
    stamps: list[tuple[int, int, int] | None] = []
    for name in names:
        try:
            stat = os.stat(cwd / name)
        except OSError:
            stamps.append(None)
            continue
        regular = S_ISREG(stat.st_mode)
        stamps.append((stat.st_ino, stat.st_size, stat.st_mtime_ns) if regular else None)
    return tuple(stamps)


class Provisioner:
    def __init__(
        self,
        engine: Engine,
        *,
        cwd: str | None,
        instruction_files: Sequence[str] = ("AGENTS.md",),
        max_instruction_chars: int = 64_000,
        index_timeout: float = 2.0,
        planner: Planner | None = None,
    ) -> None:
        self._engine = engine
        self._planner = planner
        self._cwd = cwd
        self._instruction_files = tuple(instruction_files)
        self._max_instruction_chars = max_instruction_chars
        self._index_timeout = index_timeout
        self._instructions: tuple[_FileStamps, list[str]] | None = None

    async def provision(self, record: TurnRecord) -> Provisioned:
        """The run's tools and system prompt; in ``planned`` mode, its plan too."""
        provisioned = await self._prompt_and_tools(record)
        if record.mode != "planned" or self._planner is None:
            return provisioned
        plan, usage = await self._planner.plan(record, provisioned.tools)
        return replace(provisioned, plan=plan, plan_usage=usage)

    async def _prompt_and_tools(self, record: TurnRecord) -> Provisioned:
        catalog = await self._engine.list_functions()
        tools = offered_tools(catalog, record.tool_patterns)
        if record.system_prompt_override is not None:
            prompt = _with_instructions(record.system_prompt_override, record.instructions)
            return Provisioned(system_prompt=prompt, tools=tools)
        index = await self.skills_index(catalog)
        tool_name: str | None = None
        if index:
            tools = offered_tools(catalog, [*record.tool_patterns, SKILLS_GET_TOOL.id])
            tool_name = next((t.name for t in tools if t.function_id == SKILLS_GET_TOOL.id), None)
        prompt = await self.system_prompt(
            record.mode, skills_index=index if tool_name else None, skills_tool=tool_name
        )
        return Provisioned(
            system_prompt=_with_instructions(prompt, record.instructions), tools=tools
        )

    async def system_prompt(
        self, mode: Mode, *, skills_index: str | None = None, skills_tool: str | None = None
    ) -> str:
        """Mode paragraph, identity, working directory, project instructions, skills index."""
        pieces = [prompt_piece(f"mode_{mode}"), prompt_piece("identity")]
        if self._cwd:
            pieces.append(prompt_piece("working_directory", cwd=self._cwd))
            pieces.extend(await self._instructions_in(Path(self._cwd)))
        if skills_index and skills_tool:
            pieces.append(prompt_piece("skills", tool=skills_tool, index=skills_index))
        return "\n\n".join(pieces)

    async def _instructions_in(self, cwd: Path) -> list[str]:
        """The project instruction pieces, read again (in a thread) only when a file changed:
        a run's provisioning costs a few ``stat`` calls, not a thread hop."""
        stamps = _stamps(cwd, self._instruction_files)
        if self._instructions is None or self._instructions[0] != stamps:
            found = await asyncio.to_thread(self._project_instructions, cwd)
            self._instructions = (stamps, found)
        return self._instructions[1]

    def _project_instructions(self, cwd: Path) -> list[str]:
        found = []
        for name in self._instruction_files:
            path = cwd / name
            try:
                if not path.is_file():
                    continue
                text = path.read_text(encoding="utf-8", errors="replace").strip()
            except OSError as exc:
                _log.warning("provisioning: cannot read %s: %s", path, exc.strerror or exc)
                continue
            if not text:
                continue
            limit = self._max_instruction_chars
            if len(text) > limit:
                text = (
                    text[:limit]
                    + "\n\n"
                    + prompt_piece("clipped", file=name, shown=str(limit), total=str(len(text)))
                )
            found.append(prompt_piece("project_instructions", file=name, instructions=text))
        return found

    async def skills_index(self, catalog: list[FunctionInfo]) -> str | None:
        """The directory worker's skills index, or ``None`` (no worker, no skills, a failure)."""
        if not any(info.function_id == SKILLS_INDEX.id for info in catalog):
            return None
        try:
            reply = await SKILLS_INDEX.call(
                self._engine, IndexRequest(), timeout=self._index_timeout
            )
        except (EngineError, ValidationError) as exc:
            _log.warning("provisioning: no skills index (%s)", exc)
            return None
        return reply.body.strip() or None


def offered_tools(catalog: list[FunctionInfo], patterns: list[str]) -> list[ToolOffer]:
    """One offer per function id matching ``patterns`` and not in :data:`NEVER_OFFERED`."""
    chosen: dict[str, FunctionInfo] = {}
    for info in sorted(catalog, key=lambda f: f.function_id):
        if info.function_id in chosen or _matches(info.function_id, NEVER_OFFERED):
            continue
        if _matches(info.function_id, patterns):
            chosen[info.function_id] = info
    traits = {fid: traits_of(info.request_schema) for fid, info in chosen.items()}
    names = ToolNames(chosen, preferred={fid: t.name for fid, t in traits.items() if t.name})
    return [
        ToolOffer(
            name=names.name(function_id),
            function_id=function_id,
            description=info.description,
            parameters=_parameters(info),
            traits=traits[function_id],
        )
        for function_id, info in chosen.items()
    ]


def _with_instructions(prompt: str, instructions: str | None) -> str:
    if not instructions:
        return prompt
    return f"{prompt}\n\n{instructions}" if prompt else instructions


def _matches(function_id: str, patterns: list[str] | tuple[str, ...]) -> bool:
    return _matcher(tuple(patterns))(function_id) is not None


@functools.lru_cache(maxsize=256)
def _matcher(patterns: tuple[str, ...]) -> Callable[[str], object]:
    """One compiled regex for a set of globs: every run matches every catalog function."""
    if not patterns:
        return lambda _: None
    return re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in patterns)).match


def _parameters(info: FunctionInfo) -> dict[str, object]:
    schema = dict(info.request_schema or {"type": "object", "properties": {}})
    schema.setdefault("type", "object")
    return schema
