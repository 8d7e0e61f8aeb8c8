"""The ``directory`` worker: SKILL.md parsing, folder precedence, the index, catalog fallback."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tackroom.contracts.directory import RegisterRequest
from tackroom.contracts.tools import model_schema
from tackroom.engine import Engine, InvocationError, open_engine
from tackroom.runtime import HarnessConfig, Host
from tackroom.testing.contracts.directory import write_skill
from tackroom.testing.engines import MEMORY_URL
from tackroom.workers.directory.skills import SkillFormatError, load_folder, parse_skill
from tackroom.workers.directory.worker import WORKER, DirectoryConfig, default_user_dir


def skill_md(front: str, body: str = "Body.") -> str:
    return f"---\n{front}\n---\n{body}\n"


# -- SKILL.md ----------------------------------------------------------------------------------
def test_parse_a_skill() -> None:
    text = "\ufeff" + skill_md(
        "name: pdf-tools\ndescription: >\n  Fill and merge\n  PDF forms.\nlicense: MIT\n"
        "allowed-tools: [fs::read]",
        "\n# PDF\n\nSteps.\n\n",
    )
    assert parse_skill(text, default_name="folder") == (
        "pdf-tools",
        "Fill and merge PDF forms.",
        "# PDF\n\nSteps.",
    )
    assert parse_skill(skill_md("description: d"), default_name="from-folder")[0] == "from-folder"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("# no front matter\n", "must start with a '---' line"),
        ("---\nname: x\ndescription: d\n", "no closing"),
        (skill_md("name: [unclosed"), "invalid YAML"),
        (skill_md("- a list"), "not a mapping"),
        (skill_md("name: x"), "no 'description'"),
        (skill_md("name: x\ndescription: '   '"), "no 'description'"),
        (skill_md("name: Has Spaces\ndescription: d"), "is not a skill name"),
        (skill_md("name: 12\ndescription: d"), "is not a skill name"),
        (skill_md("name: x\ndescription: " + "d" * 1025), "over 1024"),
    ],
)
def test_a_bad_skill_file_says_why(text: str, reason: str) -> None:
    with pytest.raises(SkillFormatError, match=reason):
        parse_skill(text, default_name="folder")


def test_load_folder_skips_what_is_not_a_skill(tmp_path: Path) -> None:
    assert load_folder(tmp_path / "missing", "user") == ([], [])
    write_skill(tmp_path, "good", name="good", description="Good.", body="g")
    write_skill(tmp_path, ".hidden", name="hidden", description="Hidden.", body="h")
    (tmp_path / "no-skill-file").mkdir()
    (tmp_path / "loose-file.md").write_text("not a folder")
    (tmp_path / "binary").mkdir()
    (tmp_path / "binary" / "SKILL.md").write_bytes(b"---\xff\xfe")
    skills, problems = load_folder(tmp_path, "user")
    assert [s.name for s in skills] == ["good"]
    assert skills[0].path == str(tmp_path / "good" / "SKILL.md")
    assert [(Path(p.path).parent.name, p.reason) for p in problems] == [
        ("binary", "cannot read: not UTF-8 text")
    ]


# -- the worker --------------------------------------------------------------------------------
@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "repo"


@pytest.fixture
def user(tmp_path: Path) -> Path:
    return tmp_path / "user-skills"


def host_for(**section: Any) -> Host:
    config = HarnessConfig(schema_version=1, worker_config={"directory": section})
    return Host(engine=open_engine(MEMORY_URL), workers=[WORKER], config=config)


@pytest.fixture
async def bus(root: Path, user: Path) -> AsyncIterator[Engine]:
    async with host_for(project_root=str(root), user_dir=str(user)) as host:
        yield host.engine


async def test_precedence_is_project_folders_then_user_then_workers(
    bus: Engine, root: Path, user: Path
) -> None:
    write_skill(root / ".tackroom/skills", "a", name="same", description="first", body="1")
    write_skill(root / "skills", "a", name="same", description="second", body="2")
    write_skill(user, "a", name="same", description="third", body="3")
    write_skill(user, "b", name="mine", description="user only", body="u")
    await bus.trigger(
        "directory::skills::register", {"name": "mine", "description": "worker", "body": "w"}
    )
    await bus.trigger(
        "directory::skills::register", {"name": "extra", "description": "worker", "body": "x"}
    )
    listed = await bus.trigger("directory::skills::list", {})
    assert [(s["name"], s["source"], s["description"]) for s in listed["skills"]] == [
        ("extra", "worker", "worker"),
        ("mine", "user", "user only"),
        ("same", "project", "first"),
    ]
    shadowed = [p["reason"] for p in listed["problems"]]
    assert len(shadowed) == 3
    assert all("shadowed" in reason for reason in shadowed)


async def test_registered_skills_are_versioned_state(bus: Engine) -> None:
    await bus.trigger(
        "directory::skills::register",
        {"name": "fs-read", "description": "Read  a\nfile.", "body": "\n# fs::read\n",
         "function_id": "fs::read"},
    )  # fmt: skip
    entry = await bus.get_state("skills", "fs-read")
    assert entry is not None
    assert entry.value["schema_version"] == 1
    assert (entry.value["description"], entry.value["body"]) == ("Read a file.", "# fs::read")
    revision = entry.revision
    again = RegisterRequest(
        name="fs-read", description="Read a file.", body="# fs::read", function_id="fs::read"
    )
    await bus.trigger("directory::skills::register", again.model_dump())
    unchanged = await bus.get_state("skills", "fs-read")
    assert unchanged is not None
    assert unchanged.revision == revision  # an identical register writes nothing
    await bus.set_state("skills", "junk", {"schema_version": 9})
    listed = await bus.trigger("directory::skills::list", {})
    assert [s["name"] for s in listed["skills"]] == ["fs-read"]
    assert any("skills/junk" in p["path"] for p in listed["problems"])


async def test_get_falls_back_to_a_functions_catalog_entry(bus: Engine) -> None:
    async def handler(payload: Any) -> Any:
        return payload

    schema = model_schema(RegisterRequest, idempotent=True)
    await bus.register_function(
        "demo::echo", handler, description="Echo the payload.", request_schema=schema
    )
    skill = await bus.trigger("directory::skills::get", {"name": "demo::echo"})
    assert (skill["source"], skill["function_id"]) == ("catalog", "demo::echo")
    assert skill["description"] == "Echo the payload."
    assert '"function_id"' in skill["body"]
    assert "x-tackroom" not in skill["body"]
    tool = await bus.trigger("skills::get", {"name": "demo::echo"})
    assert tool["body"] == skill["body"]


async def test_catalog_fallback_can_be_turned_off(root: Path, user: Path) -> None:
    async with host_for(project_root=str(root), user_dir=None, catalog_fallback=False) as host:
        with pytest.raises(InvocationError) as caught:
            await host.engine.trigger("directory::skills::get", {"name": "skills::get"})
        assert caught.value.remote_code == "skill_not_found"


async def test_get_tolerates_case_and_a_md_suffix(bus: Engine, root: Path) -> None:
    write_skill(root / "skills", "r", name="release-notes", description="Notes.", body="r")
    for name in ["release-notes", " Release-Notes ", "release-notes.md"]:
        reply = await bus.trigger("directory::skills::get", {"name": name})
        assert reply["name"] == "release-notes"


async def test_the_index_clips_and_caps(root: Path, user: Path) -> None:
    for i in range(5):
        write_skill(root / "skills", f"s{i}", name=f"skill-{i}", description="d" * 100, body="b")
    async with host_for(
        project_root=str(root), user_dir=None, index_max_skills=3, index_description_chars=20
    ) as host:
        await host.engine.trigger(
            "directory::skills::register",
            {"name": "a-fn", "description": "For a function.", "body": "b", "function_id": "x::y"},
        )
        index = await host.engine.trigger("directory::skills::index", {})
    assert (index["count"], index["total"]) == (3, 6)
    lines = index["body"].splitlines()
    assert lines[0] == "- `a-fn` (function `x::y`): For a function."
    assert lines[1] == "- `skill-0`: " + "d" * 19 + "…"
    assert lines[-1] == "- … and 3 more skills, not listed here"


def test_the_default_user_folder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", "/xdg")
    assert default_user_dir() == Path("/xdg/tackroom/skills")
    monkeypatch.delenv("XDG_CONFIG_HOME")
    monkeypatch.setenv("HOME", "/home/someone")
    assert DirectoryConfig().user_dir == Path("/home/someone/.config/tackroom/skills")
    assert DirectoryConfig().project_dirs == [Path(".tackroom/skills"), Path("skills")]
