"""The ``directory`` worker: ``directory::skills::list/get/index/register``, tool ``skills::get``.

```yaml
worker_config:
  directory:
    user_dir: ~/.config/tackroom/skills        # default ($XDG_CONFIG_HOME honoured); null: none
    project_dirs: [.tackroom/skills, skills]   # relative to project_root
    project_root: null                         # default: the working directory
    state_scope: skills                        # where registered skills live in engine state
    index_max_skills: 200
    index_description_chars: 300
    catalog_fallback: true                     # get(<function id>) describes the function
```

Skills are looked up in this order, the first of a name winning: the project folders (in order),
the user's folder, the skills workers registered. Folders are read on each call, so a skill
added while the harness runs is seen at once; registered skills live in engine state, so every
process sees them.
"""

from __future__ import annotations

import asyncio
import difflib
import json
import os
import time
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tackroom.contracts.directory import (
    SKILL_NOT_FOUND_ERROR,
    SKILLS_GET,
    SKILLS_GET_TOOL,
    SKILLS_INDEX,
    SKILLS_LIST,
    SKILLS_REGISTER,
    GetRequest,
    IndexRequest,
    IndexResponse,
    ListRequest,
    ListResponse,
    Problem,
    RegisterRequest,
    RegisterResponse,
    SkillBody,
    SkillSource,
    ToolGetRequest,
    ToolSkill,
)
from tackroom.contracts.tools import TRAITS_KEY, CallContext
from tackroom.engine.errors import FunctionError
from tackroom.engine.protocol import Engine
from tackroom.runtime.tools import serve_tool
from tackroom.runtime.worker import WorkerConfig, WorkerContext, WorkerSpec
from tackroom.workers.directory.skills import Skill, load_folder, merge

__all__ = ["WORKER", "Directory", "DirectoryConfig", "RegisteredSkill", "default_user_dir"]


def default_user_dir() -> Path:
    """``$XDG_CONFIG_HOME/tackroom/skills``, else ``~/.config/tackroom/skills``."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "tackroom" / "skills"


class DirectoryConfig(WorkerConfig):
    user_dir: Path | None = Field(default_factory=default_user_dir)
    project_dirs: list[Path] = Field(
        default_factory=lambda: [Path(".tackroom/skills"), Path("skills")]
    )
    project_root: Path | None = None
    state_scope: str = Field(default="skills", min_length=1)
    index_max_skills: int = Field(default=200, ge=1)
    index_description_chars: int = Field(default=300, ge=20)
    catalog_fallback: bool = True


class RegisteredSkill(BaseModel):
    """A registered skill as kept in engine state (scope ``skills``, key: its name)."""

    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[1] = 1
    name: str
    description: str
    body: str
    function_id: str | None = None
    registered_at: float


class Directory:
    """The handlers, over the skill folders and the engine's state."""

    def __init__(self, engine: Engine, config: DirectoryConfig, *, root: Path) -> None:
        self._engine = engine
        self._config = config
        self._project = [(root / d.expanduser()).absolute() for d in config.project_dirs]
        self._user = config.user_dir.expanduser().absolute() if config.user_dir else None

    # -- gathering -----------------------------------------------------------------------------
    def _roots(self) -> list[tuple[Path, SkillSource]]:
        roots: list[tuple[Path, SkillSource]] = [(d, "project") for d in self._project]
        if self._user is not None:
            roots.append((self._user, "user"))
        return roots

    def _scan(self) -> tuple[list[list[Skill]], list[Problem]]:
        groups: list[list[Skill]] = []
        problems: list[Problem] = []
        for root, source in self._roots():
            found, trouble = load_folder(root, source)
            groups.append(found)
            problems.extend(trouble)
        return groups, problems

    async def _registered(self) -> tuple[list[Skill], list[Problem]]:
        skills: list[Skill] = []
        problems: list[Problem] = []
        for entry in await self._engine.list_state(self._config.state_scope):
            try:
                record = RegisteredSkill.model_validate(entry.value)
            except ValidationError:
                problems.append(
                    Problem(
                        path=f"state:{self._config.state_scope}/{entry.key}",
                        reason="not a registered skill of schema_version 1",
                    )
                )
                continue
            skills.append(
                Skill(
                    record.name,
                    record.description,
                    record.body,
                    "worker",
                    function_id=record.function_id,
                )
            )
        return skills, problems

    async def skills(self) -> tuple[list[Skill], list[Problem]]:
        """Every skill (one per name, by precedence) and the problems met on the way."""
        groups: list[list[Skill]] = []
        problems: list[Problem] = []
        # Folders are read in a thread (there may be many files); when none exists (most runs
        # of a program that ships no skills) there is nothing to read and no thread to wait for.
        if any(_may_hold_skills(root) for root, _ in self._roots()):
            groups, problems = await asyncio.to_thread(self._scan)
        registered, trouble = await self._registered()
        merged, shadowed = merge([*groups, registered])
        return merged, [*problems, *trouble, *shadowed]

    # -- lookup --------------------------------------------------------------------------------
    async def find(self, name: str) -> Skill:
        skills, _ = await self.skills()
        wanted = name.strip()
        for key in (wanted, wanted.lower().removesuffix(".md")):
            for skill in skills:
                if skill.name == key:
                    return skill
        for skill in skills:
            if skill.function_id == wanted:
                return skill
        if self._config.catalog_fallback and "::" in wanted:
            described = await self._from_catalog(wanted)
            if described is not None:
                return described
        names = sorted({s.name for s in skills} | {s.function_id for s in skills if s.function_id})
        close = difflib.get_close_matches(wanted.lower(), names, n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise FunctionError(SKILL_NOT_FOUND_ERROR, f"no skill named {wanted!r}{hint}")

    async def _from_catalog(self, function_id: str) -> Skill | None:
        for info in await self._engine.list_functions():
            if info.function_id != function_id:
                continue
            schema = {k: v for k, v in (info.request_schema or {}).items() if k != TRAITS_KEY}
            description = info.description or f"The function {function_id}."
            body = (
                f"# {function_id}\n\n{description}\n\n"
                "No skill describes this function; this is its catalog entry.\n\n"
                f"Request schema:\n\n```json\n{json.dumps(schema, indent=2)}\n```"
            )
            return Skill(function_id, description, body, "catalog", function_id=function_id)
        return None

    # -- handlers ------------------------------------------------------------------------------
    async def list(self, request: ListRequest) -> ListResponse:
        skills, problems = await self.skills()
        needle = (request.search or "").lower()
        chosen = [
            s.info()
            for s in skills
            if (request.source is None or s.source == request.source)
            and (needle in s.name.lower() or needle in s.description.lower())
        ]
        return ListResponse(skills=chosen, problems=problems)

    async def get(self, request: GetRequest) -> SkillBody:
        return (await self.find(request.name)).whole()

    async def tool_get(self, request: ToolGetRequest, call: CallContext | None) -> ToolSkill:
        skill = await self.find(request.name)
        return ToolSkill(name=skill.name, description=skill.description, body=skill.body)

    async def index(self, request: IndexRequest) -> IndexResponse:
        skills, _ = await self.skills()
        limit = self._config.index_max_skills
        lines = [self._index_line(skill) for skill in skills[:limit]]
        if len(skills) > limit:
            lines.append(f"- … and {len(skills) - limit} more skills, not listed here")
        return IndexResponse(
            body="\n".join(lines), count=min(limit, len(skills)), total=len(skills)
        )

    def _index_line(self, skill: Skill) -> str:
        width = self._config.index_description_chars
        text = skill.description
        if len(text) > width:
            text = text[: width - 1].rstrip() + "…"
        target = f" (function `{skill.function_id}`)" if skill.function_id else ""
        return f"- `{skill.name}`{target}: {text}"

    async def register(self, request: RegisterRequest) -> RegisterResponse:
        scope = self._config.state_scope
        existing = await self._engine.get_state(scope, request.name)
        record = RegisteredSkill(
            name=request.name,
            description=" ".join(request.description.split()),
            body=request.body.strip(),
            function_id=request.function_id,
            registered_at=time.time(),
        )
        if existing is not None:
            same = {**existing.value, "registered_at": record.registered_at} == record.model_dump()
            if same:
                return RegisterResponse(name=request.name, created=False)
        await self._engine.set_state(scope, request.name, record.model_dump(mode="json"))
        return RegisterResponse(name=request.name, created=existing is None)


async def _start(ctx: WorkerContext[DirectoryConfig]) -> None:
    config = ctx.config
    root = (config.project_root or Path.cwd()).expanduser().absolute()
    directory = Directory(ctx.engine, config, root=root)
    await ctx.serve(SKILLS_LIST, directory.list)
    await ctx.serve(SKILLS_GET, directory.get)
    await ctx.serve(SKILLS_INDEX, directory.index)
    await ctx.serve(SKILLS_REGISTER, directory.register)
    await serve_tool(ctx, SKILLS_GET_TOOL, directory.tool_get)


WORKER = WorkerSpec(
    name="directory",
    description="Skills (Agent Skills folders and worker-registered skills): directory::skills::*.",
    config_model=DirectoryConfig,
    start=_start,
)


def _may_hold_skills(root: Path) -> bool:
    """Whether ``root`` is a folder to read (one that cannot even be looked at is read, so the
    scan reports why)."""
    try:
        return root.is_dir()
    except OSError:
        return True
