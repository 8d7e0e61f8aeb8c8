"""The contract of a directory worker (``directory::skills::*`` and the ``skills::get`` tool).

Any worker that replaces ``directory`` proves it fits by running this suite: subclass
:class:`DirectoryContract` in a ``test_*.py`` module, name the worker and say how to point it at
a project skill folder and a user skill folder (:meth:`~DirectoryContract.worker_config`)::

    class TestMyDirectory(DirectoryContract):
        worker_name = "my-directory"

Skills in folders follow the Agent Skills convention: ``<folder>/<skill>/SKILL.md`` with YAML
front matter (``name``, ``description``) and a markdown body.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from tackroom.contracts.tools import traits_of
from tackroom.engine import Engine
from tackroom.testing.contracts.base import WorkerContract

__all__ = ["DirectoryContract", "write_skill"]


def write_skill(root: Path, folder: str, *, name: str, description: str, body: str) -> Path:
    path = root / folder / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\nname: {name}\ndescription: {description}\n---\n{body}\n")
    return path


class DirectoryContract(WorkerContract):
    worker_name: ClassVar[str] = "directory"

    def worker_config(self, project: Path, user: Path) -> dict[str, Any]:
        """The worker's config section: skills from ``project`` first, then from ``user``."""
        return {"project_root": str(project), "project_dirs": ["."], "user_dir": str(user)}

    @pytest.fixture
    def project(self, tmp_path: Path) -> Path:
        return tmp_path / "project-skills"

    @pytest.fixture
    def user(self, tmp_path: Path) -> Path:
        return tmp_path / "user-skills"

    @pytest.fixture
    async def bus(self, engine_url: str, project: Path, user: Path) -> AsyncIterator[Engine]:
        async with self.hosted(engine_url, self.worker_config(project, user)) as engine:
            yield engine

    async def names(self, bus: Engine, **request: Any) -> list[str]:
        reply = await self.call(bus, "directory::skills::list", request)
        return [skill["name"] for skill in reply["skills"]]

    # -- folders -------------------------------------------------------------------------------
    async def test_no_skills_anywhere(self, bus: Engine) -> None:
        assert await self.names(bus) == []
        index = await self.call(bus, "directory::skills::index", {})
        assert (index["body"], index["count"]) == ("", 0)

    async def test_folder_skills_are_listed_and_fetched(
        self, bus: Engine, project: Path, user: Path
    ) -> None:
        write_skill(project, "release", name="release-notes", description="Write notes.",
                    body="# Release notes\n\n1. Read the log.")  # fmt: skip
        write_skill(user, "tone", name="tone", description="House style.", body="Be brief.")
        listed = await self.call(bus, "directory::skills::list", {})
        by_name = {s["name"]: s for s in listed["skills"]}
        assert set(by_name) == {"release-notes", "tone"}
        assert by_name["release-notes"]["source"] == "project"
        assert by_name["tone"]["source"] == "user"
        assert "body" not in by_name["tone"]
        skill = await self.call(bus, "directory::skills::get", {"name": "release-notes"})
        assert skill["schema_version"] == 1
        assert skill["description"] == "Write notes."
        assert skill["body"] == "# Release notes\n\n1. Read the log."
        assert await self.names(bus, search="style") == ["tone"]
        assert await self.names(bus, source="project") == ["release-notes"]

    async def test_a_project_skill_shadows_a_user_skill_of_the_same_name(
        self, bus: Engine, project: Path, user: Path
    ) -> None:
        write_skill(project, "tone", name="tone", description="Project tone.", body="P")
        write_skill(user, "tone", name="tone", description="User tone.", body="U")
        skill = await self.call(bus, "directory::skills::get", {"name": "tone"})
        assert (skill["body"], skill["source"]) == ("P", "project")
        listed = await self.call(bus, "directory::skills::list", {})
        assert [s["name"] for s in listed["skills"]] == ["tone"]

    async def test_a_broken_skill_file_is_a_problem_not_a_failure(
        self, bus: Engine, project: Path
    ) -> None:
        write_skill(project, "ok", name="ok", description="Fine.", body="ok")
        broken = project / "broken" / "SKILL.md"
        broken.parent.mkdir(parents=True)
        broken.write_text("no front matter here\n")
        listed = await self.call(bus, "directory::skills::list", {})
        assert [s["name"] for s in listed["skills"]] == ["ok"]
        assert any(p["path"].endswith("SKILL.md") and "broken" in p["path"]
                   for p in listed["problems"])  # fmt: skip

    # -- registered skills ---------------------------------------------------------------------
    async def test_workers_register_skills_for_their_functions(self, bus: Engine) -> None:
        skill = {
            "name": "calc-add",
            "description": "Add two numbers with calc::add.",
            "body": "# calc::add\n\n(a, b) → {result}\n\nErrors: result_too_large.",
            "function_id": "calc::add",
        }
        first = await self.call(bus, "directory::skills::register", skill)
        assert (first["name"], first["created"]) == ("calc-add", True)
        again = await self.call(bus, "directory::skills::register", skill)
        assert again["created"] is False
        fetched = await self.call(bus, "directory::skills::get", {"name": "calc-add"})
        assert (fetched["source"], fetched["function_id"]) == ("worker", "calc::add")
        assert fetched["body"] == skill["body"]
        by_function = await self.call(bus, "directory::skills::get", {"name": "calc::add"})
        assert by_function["name"] == "calc-add"
        changed = await self.call(
            bus, "directory::skills::register", {**skill, "body": "# calc::add\n\nNew."}
        )
        assert changed["created"] is False
        fetched = await self.call(bus, "directory::skills::get", {"name": "calc-add"})
        assert fetched["body"] == "# calc::add\n\nNew."

    async def test_register_refuses_bad_names(self, bus: Engine) -> None:
        for name in ["", "Has Space", "UPPER", "../escape"]:
            error = await self.failure(
                bus,
                "directory::skills::register",
                {"name": name, "description": "d", "body": "b"},
            )
            assert error.remote_code == "invalid_request", name

    # -- index, get, the tool ------------------------------------------------------------------
    async def test_the_index_is_one_line_per_skill(self, bus: Engine, project: Path) -> None:
        write_skill(project, "b", name="beta", description="Second skill.", body="b")
        write_skill(project, "a", name="alpha", description="First skill.", body="a")
        await self.call(
            bus,
            "directory::skills::register",
            {"name": "gamma", "description": "Third skill.", "body": "g"},
        )
        index = await self.call(bus, "directory::skills::index", {})
        assert index["schema_version"] == 1
        assert index["count"] == index["total"] == 3
        lines = index["body"].splitlines()
        assert len(lines) == 3
        for name, description in [
            ("alpha", "First skill."),
            ("beta", "Second skill."),
            ("gamma", "Third skill."),
        ]:
            assert any(name in line and description in line for line in lines)
        assert "a" not in {line.strip() for line in lines}  # bodies stay out of the index

    async def test_an_unknown_name_gets_close_matches(self, bus: Engine, project: Path) -> None:
        write_skill(project, "r", name="release-notes", description="Notes.", body="r")
        error = await self.failure(bus, "directory::skills::get", {"name": "release-note"})
        assert error.remote_code == "skill_not_found"
        assert "release-notes" in error.message
        tool_error = await self.failure(bus, "skills::get", {"name": "relase-notes"})
        assert tool_error.remote_code == "skill_not_found"
        assert "release-notes" in tool_error.message

    async def test_the_skills_tool_returns_a_body_and_is_safe_to_repeat(
        self, bus: Engine, project: Path
    ) -> None:
        write_skill(project, "r", name="release-notes", description="Notes.", body="# Steps")
        call = {"session_id": "s1", "function_call_id": "c1"}
        reply = await self.call(bus, "skills::get", {"name": "release-notes", "_call": call})
        assert reply == {
            "schema_version": 1,
            "name": "release-notes",
            "description": "Notes.",
            "body": "# Steps",
        }
        [info] = [f for f in await bus.list_functions() if f.function_id == "skills::get"]
        traits = traits_of(info.request_schema)
        assert (traits.idempotent, traits.parallel) == (True, True)
        assert info.description
