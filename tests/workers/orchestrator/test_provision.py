"""Provisioning: the assembled system prompt (data files, AGENTS.md, skills index) and tools."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tackroom.engine import Engine, open_engine
from tackroom.runtime import HarnessConfig, Host, load_worker
from tackroom.testing.contracts.directory import write_skill
from tackroom.testing.engines import MEMORY_URL
from tackroom.workers.orchestrator.provision import Provisioner, prompt_piece
from tackroom.workers.orchestrator.record import TurnRecord


def record(**fields: Any) -> TurnRecord:
    base: dict[str, Any] = {
        "session_id": "s1",
        "run_id": "r1",
        "provider": "scripted",
        "model": "m",
        "tool_patterns": ["calc::*"],
    }
    return TurnRecord.model_validate({**base, **fields})


@pytest.fixture
def cwd(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    return path


def host_for(cwd: Path, *workers: str) -> Host:
    config = HarnessConfig(
        schema_version=1,
        worker_config={"directory": {"project_root": str(cwd), "user_dir": None}},
    )
    specs = [load_worker(name) for name in workers]
    return Host(engine=open_engine(MEMORY_URL), workers=specs, config=config)


@pytest.fixture
async def plain(cwd: Path) -> AsyncIterator[Engine]:
    """Tools but no directory worker."""
    async with host_for(cwd, "utilities") as host:
        yield host.engine


@pytest.fixture
async def with_directory(cwd: Path) -> AsyncIterator[Engine]:
    async with host_for(cwd, "utilities", "directory") as host:
        yield host.engine


async def test_the_prompt_is_assembled_from_data_files_in_order(plain: Engine, cwd: Path) -> None:
    (cwd / "AGENTS.md").write_text("Run `make test` before you finish.\n")
    for mode in ("plan", "ask", "agent"):
        provisioned = await Provisioner(plain, cwd=str(cwd)).provision(record(mode=mode))
        pieces = provisioned.system_prompt.split("\n\n")
        assert pieces[0] == prompt_piece(f"mode_{mode}")
        assert "\n\n".join(pieces[1:]).startswith(prompt_piece("identity"))
        prompt = provisioned.system_prompt
        assert prompt.index(prompt_piece("identity")) < prompt.index(f"Working directory: {cwd}")
        assert prompt.index(f"Working directory: {cwd}") < prompt.index("AGENTS.md")
        assert prompt.endswith("Run `make test` before you finish.")
        assert "Skills" not in prompt
        assert [t.function_id for t in provisioned.tools] == [
            "calc::add",
            "calc::evaluate",
        ]


async def test_without_agents_md_or_cwd_those_pieces_are_left_out(plain: Engine, cwd: Path) -> None:
    prompt = (await Provisioner(plain, cwd=str(cwd)).provision(record())).system_prompt
    assert "AGENTS.md" not in prompt
    bare = (await Provisioner(plain, cwd=None).provision(record())).system_prompt
    assert bare == prompt_piece("mode_agent") + "\n\n" + prompt_piece("identity")


async def test_a_long_agents_md_is_clipped(plain: Engine, cwd: Path) -> None:
    (cwd / "AGENTS.md").write_text("x" * 500)
    provisioner = Provisioner(plain, cwd=str(cwd), max_instruction_chars=100)
    prompt = (await provisioner.provision(record())).system_prompt
    assert "x" * 100 in prompt
    assert "x" * 101 not in prompt
    assert "AGENTS.md is 500 characters long; only the first 100 are shown" in prompt


async def test_an_added_edited_or_removed_agents_md_is_seen_by_the_next_run(
    plain: Engine, cwd: Path
) -> None:
    provisioner = Provisioner(plain, cwd=str(cwd))

    async def prompt() -> str:
        return (await provisioner.provision(record())).system_prompt

    assert "AGENTS.md" not in await prompt()
    agents = cwd / "AGENTS.md"
    agents.write_text("first")
    assert (await prompt()).endswith("first")
    assert (await prompt()).endswith("first")  # unchanged: kept, not read again
    agents.write_text("second, longer")
    assert (await prompt()).endswith("second, longer")
    replaced = cwd / "new.md"
    replaced.write_text("third, sized!!")  # the same size, renamed over it: another inode
    replaced.replace(agents)
    assert (await prompt()).endswith("third, sized!!")
    agents.unlink()
    assert "AGENTS.md" not in await prompt()


async def test_an_override_is_used_verbatim(with_directory: Engine, cwd: Path) -> None:
    (cwd / "AGENTS.md").write_text("ignored")
    write_skill(cwd / "skills", "s", name="style", description="House style.", body="b")
    provisioned = await Provisioner(with_directory, cwd=str(cwd)).provision(
        record(system_prompt_override="  You are terse.\n")
    )
    assert provisioned.system_prompt == "  You are terse.\n"
    assert "skills::get" not in [t.function_id for t in provisioned.tools]


async def test_the_skills_index_and_tool_come_with_the_directory(
    with_directory: Engine, cwd: Path
) -> None:
    write_skill(cwd / "skills", "s", name="style", description="House style.", body="b")
    provisioned = await Provisioner(with_directory, cwd=str(cwd)).provision(record())
    prompt = provisioned.system_prompt
    assert prompt.endswith("- `style`: House style.")
    offered = {t.function_id: t for t in provisioned.tools}
    assert set(offered) == {"calc::add", "calc::evaluate", "skills::get"}
    assert f"`{offered['skills::get'].name}` tool" in prompt
    assert offered["skills::get"].traits.idempotent


async def test_no_skills_means_no_index_and_no_tool(with_directory: Engine, cwd: Path) -> None:
    provisioned = await Provisioner(with_directory, cwd=str(cwd)).provision(record())
    assert "Skills" not in provisioned.system_prompt
    assert "skills::get" not in [t.function_id for t in provisioned.tools]


async def test_a_slow_or_failing_index_is_skipped(plain: Engine, cwd: Path) -> None:
    async def slow(payload: Any) -> Any:
        await asyncio.sleep(5)
        return {"body": "- `late`: too late"}

    await plain.register_function("directory::skills::index", slow)
    started = time.monotonic()
    provisioner = Provisioner(plain, cwd=str(cwd), index_timeout=0.1)
    provisioned = await provisioner.provision(record())
    assert time.monotonic() - started < 2
    assert "late" not in provisioned.system_prompt


async def test_register_is_never_offered(with_directory: Engine, cwd: Path) -> None:
    provisioned = await Provisioner(with_directory, cwd=str(cwd)).provision(
        record(tool_patterns=["directory::*", "skills::*"])
    )
    offered = {t.function_id for t in provisioned.tools}
    assert "directory::skills::register" not in offered
    assert {"directory::skills::get", "skills::get"} <= offered


async def test_forgetting_a_session_is_never_offered(cwd: Path, tmp_path: Path) -> None:
    """``<worker>::forget_session`` deletes a session's data: a model must never reach it."""
    async with host_for(cwd, "utilities", "approvals") as host:
        provisioned = await Provisioner(host.engine, cwd=str(cwd)).provision(
            record(tool_patterns=["*"])
        )
        catalog = {info.function_id for info in await host.engine.list_functions()}
    offered = {t.function_id for t in provisioned.tools}
    assert "approvals::forget_session" in catalog
    assert not any(fid.endswith("::forget_session") for fid in offered)
    assert offered  # the pattern offers the utilities' tools
