"""The public face of the ``directory`` worker: its functions, payload models and error codes.

A **skill** is a named piece of instructions (the Agent Skills convention): a folder with a
``SKILL.md`` whose YAML front matter gives ``name`` and ``description`` and whose body is the
skill, or a skill a worker registers for one of its functions. Failures arrive as
``InvocationError`` whose ``remote_code`` is one of the ``*_ERROR`` codes below, or
``invalid_request`` when a payload does not validate.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from tackroom.contracts._base import Strict as _Model
from tackroom.contracts.bus import Function, Tool

__all__ = [
    "MAX_BODY_CHARS",
    "MAX_DESCRIPTION_CHARS",
    "SCHEMA_VERSION",
    "SKILLS_GET",
    "SKILLS_GET_TOOL",
    "SKILLS_INDEX",
    "SKILLS_LIST",
    "SKILLS_REGISTER",
    "SKILL_NAME_PATTERN",
    "SKILL_NOT_FOUND_ERROR",
    "GetRequest",
    "IndexRequest",
    "IndexResponse",
    "ListRequest",
    "ListResponse",
    "Problem",
    "RegisterRequest",
    "RegisterResponse",
    "SkillBody",
    "SkillInfo",
    "SkillName",
    "SkillSource",
    "ToolGetRequest",
    "ToolSkill",
]

SCHEMA_VERSION = 1

SKILL_NOT_FOUND_ERROR = "skill_not_found"
"""No skill (and no function) has that name; the message names close matches."""

SKILL_NAME_PATTERN = r"^[a-z0-9][a-z0-9._:-]{0,127}$"
"""Lower-case letters, digits, ``.``, ``_``, ``:`` and ``-`` (so ``fs::read`` is a name too)."""
MAX_DESCRIPTION_CHARS = 1024
MAX_BODY_CHARS = 256 * 1024

SkillName = Annotated[str, StringConstraints(pattern=SKILL_NAME_PATTERN)]
SkillSource = Literal["project", "user", "worker", "catalog"]
"""Where a skill comes from: a project folder, the user's folder, a worker's ``register``, or
(``get`` only) a function's catalog entry when no skill covers it."""


class _Response(_Model):
    schema_version: int = SCHEMA_VERSION


class SkillInfo(_Model):
    name: str
    description: str
    source: SkillSource
    path: str | None = Field(description="the SKILL.md file, for a folder skill")
    function_id: str | None = Field(description="the function a per-function skill describes")


class SkillBody(_Response, SkillInfo):
    """A whole skill: the reply of ``directory::skills::get``."""

    body: str


class Problem(_Model):
    path: str
    reason: str


class ListRequest(_Model):
    search: str | None = Field(
        default=None, max_length=200, description="keep skills whose name or description has it"
    )
    source: SkillSource | None = None


class ListResponse(_Response):
    skills: list[SkillInfo]
    problems: list[Problem] = Field(
        description="SKILL.md files skipped (bad front matter) or shadowed by a same-named skill"
    )


class GetRequest(_Model):
    name: str = Field(min_length=1, max_length=200)


class IndexRequest(_Model):
    pass


class IndexResponse(_Response):
    body: str = Field(description="markdown, one line per skill: name and description")
    count: int = Field(description="skills listed in body")
    total: int = Field(description="skills known")


class RegisterRequest(_Model):
    name: SkillName
    description: str = Field(min_length=1, max_length=MAX_DESCRIPTION_CHARS)
    body: str = Field(min_length=1, max_length=MAX_BODY_CHARS)
    function_id: str | None = Field(default=None, min_length=1, max_length=200)


class RegisterResponse(_Response):
    name: str
    created: bool = Field(description="false: the skill existed (and was replaced if it changed)")


class ToolGetRequest(_Model):
    name: str = Field(
        min_length=1,
        max_length=200,
        description="A skill name from the skills index, or a function id such as 'fs::read'.",
    )


class ToolSkill(_Response):
    name: str
    description: str
    body: str = Field(description="The skill's full instructions (markdown).")


SKILLS_LIST: Function[ListRequest, ListResponse] = Function(
    "directory::skills::list",
    ListRequest,
    ListResponse,
    description="Skills from the project and user folders and from workers (no bodies).",
)
SKILLS_GET: Function[GetRequest, SkillBody] = Function(
    "directory::skills::get",
    GetRequest,
    SkillBody,
    description="A skill by name (or a function id); unknown names get close matches.",
)
SKILLS_INDEX: Function[IndexRequest, IndexResponse] = Function(
    "directory::skills::index",
    IndexRequest,
    IndexResponse,
    description="A compact markdown index of the skills (name and description), for prompts.",
    hop=True,
)
SKILLS_REGISTER: Function[RegisterRequest, RegisterResponse] = Function(
    "directory::skills::register",
    RegisterRequest,
    RegisterResponse,
    description="Register (or replace) a skill, typically one describing a worker's function.",
)
SKILLS_GET_TOOL: Tool[ToolGetRequest, ToolSkill] = Tool(
    "skills::get",
    ToolGetRequest,
    ToolSkill,
    description="Fetch the full instructions of a skill named in the skills index (or the "
    "description of a function by its id). Read a skill before following it.",
    idempotent=True,
    read_only=True,
)
"""The same lookup as :data:`SKILLS_GET`, offered to models as a tool."""
