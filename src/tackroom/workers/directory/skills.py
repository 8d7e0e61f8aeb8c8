"""Skill folders: read ``<root>/<folder>/SKILL.md`` files (the Agent Skills convention).

```markdown
---
name: release-notes
description: Write release notes from a list of merged changes.
---
# Release notes

1. ...
```

The front matter is YAML between two ``---`` lines and must give a non-empty ``description``;
``name`` defaults to the folder's name. Other keys (``license``, ``allowed-tools``, ``metadata``
...) are allowed and ignored. A file that does not fit is skipped and reported as a problem.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from tackroom.contracts.directory import (
    MAX_BODY_CHARS,
    MAX_DESCRIPTION_CHARS,
    SKILL_NAME_PATTERN,
    Problem,
    SkillBody,
    SkillInfo,
    SkillSource,
)

__all__ = ["SKILL_FILE", "Skill", "SkillFormatError", "load_folder", "merge", "parse_skill"]

SKILL_FILE = "SKILL.md"
_NAME = re.compile(SKILL_NAME_PATTERN)
_FENCE = re.compile(r"^---[ \t]*$", re.MULTILINE)


class SkillFormatError(ValueError):
    """A ``SKILL.md`` without usable front matter."""


@dataclass(frozen=True, slots=True)
class Skill:
    name: str
    description: str
    body: str
    source: SkillSource
    path: str | None = None
    function_id: str | None = None

    def info(self) -> SkillInfo:
        return SkillInfo(
            name=self.name,
            description=self.description,
            source=self.source,
            path=self.path,
            function_id=self.function_id,
        )

    def whole(self) -> SkillBody:
        return SkillBody(
            name=self.name,
            description=self.description,
            source=self.source,
            path=self.path,
            function_id=self.function_id,
            body=self.body,
        )


def parse_skill(text: str, *, default_name: str) -> tuple[str, str, str]:
    """``(name, description, body)`` of a ``SKILL.md``; raise :class:`SkillFormatError`."""
    text = text.lstrip("\ufeff")
    opening = _FENCE.match(text)
    if opening is None:
        raise SkillFormatError("no front matter: the file must start with a '---' line")
    closing = _FENCE.search(text, opening.end())
    if closing is None:
        raise SkillFormatError("the front matter has no closing '---' line")
    try:
        meta = yaml.safe_load(text[opening.end() : closing.start()])
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (front matter line {mark.line + 1})" if mark is not None else ""
        raise SkillFormatError(f"invalid YAML front matter{where}") from None
    if not isinstance(meta, dict):
        raise SkillFormatError("the front matter is not a mapping of keys to values")
    name = meta.get("name", default_name)
    description = meta.get("description")
    if not isinstance(name, str) or not _NAME.match(name):
        raise SkillFormatError(
            f"name {name!r} is not a skill name (lower-case letters, digits, '-', '_', '.', ':')"
        )
    if not isinstance(description, str) or not description.strip():
        raise SkillFormatError("the front matter has no 'description'")
    description = " ".join(description.split())
    if len(description) > MAX_DESCRIPTION_CHARS:
        raise SkillFormatError(f"the description is over {MAX_DESCRIPTION_CHARS} characters")
    body = text[closing.end() :].strip()
    if len(body) > MAX_BODY_CHARS:
        raise SkillFormatError(f"the body is over {MAX_BODY_CHARS} characters")
    return name, description, body


def load_folder(root: Path, source: SkillSource) -> tuple[list[Skill], list[Problem]]:
    """The skills of ``root``'s immediate subfolders (sorted); a missing ``root`` has none."""
    skills: list[Skill] = []
    problems: list[Problem] = []
    try:
        folders = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    except (FileNotFoundError, NotADirectoryError):
        return skills, problems
    except OSError as exc:
        return skills, [Problem(path=str(root), reason=f"cannot list: {exc.strerror or exc}")]
    for folder in folders:
        path = folder / SKILL_FILE
        if not path.is_file():
            continue
        try:
            if path.stat().st_size > MAX_BODY_CHARS * 4:
                raise SkillFormatError("the file is too large for a skill")
            text = path.read_text(encoding="utf-8")
            name, description, body = parse_skill(text, default_name=folder.name)
        except SkillFormatError as exc:
            problems.append(Problem(path=str(path), reason=str(exc)))
            continue
        except (OSError, UnicodeDecodeError) as exc:
            reason = getattr(exc, "strerror", None) or "not UTF-8 text"
            problems.append(Problem(path=str(path), reason=f"cannot read: {reason}"))
            continue
        skills.append(Skill(name, description, body, source, path=str(path)))
    return skills, problems


def merge(groups: list[list[Skill]]) -> tuple[list[Skill], list[Problem]]:
    """One skill per name, the first group winning; the shadowed ones become problems."""
    chosen: dict[str, Skill] = {}
    problems: list[Problem] = []
    for group in groups:
        for skill in group:
            winner = chosen.get(skill.name)
            if winner is None:
                chosen[skill.name] = skill
                continue
            problems.append(
                Problem(
                    path=skill.path or f"{skill.source}:{skill.name}",
                    reason=f"skill {skill.name!r} is shadowed by the {winner.source} skill at "
                    f"{winner.path or 'registered by a worker'}",
                )
            )
    return sorted(chosen.values(), key=lambda s: s.name), problems
