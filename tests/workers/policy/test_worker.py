"""The ``policy`` worker on a bus: where its rules come from, hot reload, status and reload."""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from tackroom.engine import Engine, InvocationError, open_engine
from tackroom.runtime import HarnessConfig, Host, WorkerStartError
from tackroom.testing import MEMORY_URL, wait_until
from tackroom.workers.policy.worker import WORKER

CHECK = "policy::check_permissions"
DEADLINE = 5.0


def rules(decision: str, function: str = "web::*", rule_id: str = "web") -> str:
    return (
        "schema_version: 1\nrules:\n"
        f"  - id: {rule_id}\n    function: '{function}'\n    decision: {decision}\n"
    )


BROKEN = "schema_version: 1\nrules:\n  - id: web\n    function: web::*\n    decision: alow\n"


def write(path: Path, text: str) -> None:
    """Write atomically, as editors and deploy tools should (a new inode: no torn reads)."""
    temporary = path.with_suffix(".tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


@asynccontextmanager
async def serve(**config: Any) -> AsyncIterator[Engine]:
    harness = HarnessConfig(schema_version=1, worker_config={"policy": config})
    async with Host(engine=open_engine(MEMORY_URL), workers=[WORKER], config=harness) as host:
        yield host.engine


async def decide(bus: Engine, function_id: str, args: dict[str, Any] | None = None) -> str:
    reply = await bus.trigger(CHECK, {"function_id": function_id, "args": args or {}})
    return str(reply["decision"])


async def status(bus: Engine) -> dict[str, Any]:
    reply: dict[str, Any] = await bus.trigger("policy::status", {})
    return reply


def eventually(bus: Engine, function_id: str, expected: str) -> Callable[[], Any]:
    async def check() -> bool:
        return await decide(bus, function_id) == expected

    return check


# -- where the rules come from -------------------------------------------------------------------


async def test_without_a_file_the_builtin_defaults_apply(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    async with serve(reload_interval=0) as bus:
        assert await decide(bus, "fs::read", {"path": "a"}) == "allow"
        assert await decide(bus, "fs::write", {"path": "a"}) == "needs_approval"
        assert await decide(bus, "approval::resolve") == "deny"
        assert await decide(bus, "agent::researcher", {"task": "t"}) == "allow"
        assert await decide(bus, "handoff::billing") == "allow"
        info = await status(bus)
        assert info["source"] == "builtin"
        assert info["language"] == "rules"
        assert info["path"] == str(tmp_path / "permissions.yaml")
        assert info["default_decision"] == "needs_approval"
        assert info["generation"] == 1
        assert info["rule_count"] == 4
        assert info["last_error"] is None


async def test_permissions_yaml_in_the_working_directory_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "permissions.yaml").write_text(rules("allow"), encoding="utf-8")
    async with serve(reload_interval=0, default_decision="deny") as bus:
        assert await decide(bus, "web::fetch") == "allow"
        assert await decide(bus, "fs::read") == "deny"  # the file replaces the defaults
        info = await status(bus)
        assert (info["source"], info["rule_count"]) == ("file", 1)


async def test_a_rules_path_that_is_set_must_exist(tmp_path: Path) -> None:
    with pytest.raises(WorkerStartError, match="no such file"):
        async with serve(rules_path=str(tmp_path / "missing.yaml")):
            pass


async def test_a_bad_file_at_start_stops_the_worker_with_the_line(tmp_path: Path) -> None:
    path = tmp_path / "permissions.yaml"
    path.write_text(BROKEN, encoding="utf-8")
    with pytest.raises(WorkerStartError, match=r"permissions\.yaml:5: .*unknown decision 'alow'"):
        async with serve(rules_path=str(path)):
            pass


async def test_a_non_utf8_file_is_rejected_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "permissions.yaml"
    path.write_bytes(b"schema_version: 1\nrules: []\n# caf\xe9\n")
    with pytest.raises(WorkerStartError, match=r"permissions\.yaml:3: not UTF-8"):
        async with serve(rules_path=str(path)):
            pass


# -- hot reload ----------------------------------------------------------------------------------


async def test_hot_reload_applies_a_new_file_and_keeps_the_rules_on_a_bad_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "permissions.yaml"
    write(path, rules("allow"))
    async with serve(rules_path=str(path), reload_interval=0.02) as bus:
        assert await decide(bus, "web::fetch") == "allow"
        first = await status(bus)

        write(path, rules("deny"))
        await wait_until(eventually(bus, "web::fetch", "deny"), timeout=DEADLINE)
        second = await status(bus)
        assert second["generation"] == first["generation"] + 1
        assert second["digest"] != first["digest"]

        with caplog.at_level(logging.WARNING, logger="tackroom.workers.policy"):
            write(path, BROKEN)

            async def rejected() -> bool:
                return (await status(bus))["last_error"] is not None

            await wait_until(rejected, timeout=DEADLINE)
        problem = (await status(bus))["last_error"]
        assert problem["line"] == 5
        assert "unknown decision 'alow'" in problem["reason"]
        assert problem["message"].startswith(f"{path}:5: ")
        assert problem["path"] == str(path)
        assert await decide(bus, "web::fetch") == "deny"  # the previous rules stay in force
        assert (await status(bus))["generation"] == second["generation"]
        assert any("unknown decision 'alow'" in r.getMessage() for r in caplog.records)

        write(path, rules("needs_approval"))
        await wait_until(eventually(bus, "web::fetch", "needs_approval"), timeout=DEADLINE)
        assert (await status(bus))["last_error"] is None


async def test_an_in_place_rewrite_is_noticed(tmp_path: Path) -> None:
    path = tmp_path / "permissions.yaml"
    path.write_text(rules("allow"), encoding="utf-8")
    async with serve(rules_path=str(path), reload_interval=0.02) as bus:
        path.write_text(rules("deny", rule_id="webX"), encoding="utf-8")  # same inode
        await wait_until(eventually(bus, "web::fetch", "deny"), timeout=DEADLINE)


async def test_a_touched_file_is_not_a_new_generation(tmp_path: Path) -> None:
    path = tmp_path / "permissions.yaml"
    write(path, rules("allow"))
    async with serve(rules_path=str(path), reload_interval=0) as bus:
        write(path, rules("allow"))
        reloaded = await bus.trigger("policy::reload", {})
        assert reloaded["generation"] == 1


async def test_a_bad_edit_undone_clears_the_error(tmp_path: Path) -> None:
    path = tmp_path / "permissions.yaml"
    write(path, rules("allow"))
    async with serve(rules_path=str(path), reload_interval=0) as bus:
        write(path, BROKEN)
        with pytest.raises(InvocationError) as caught:
            await bus.trigger("policy::reload", {})
        assert caught.value.remote_code == "policy_file_invalid"
        assert ":5: " in caught.value.message
        assert "stay" in caught.value.message
        assert (await status(bus))["last_error"]["line"] == 5
        write(path, rules("allow"))
        reloaded = await bus.trigger("policy::reload", {})
        assert (reloaded["generation"], reloaded["last_error"]) == (1, None)


async def test_removing_the_default_file_falls_back_to_the_builtin_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "permissions.yaml", rules("deny", function="fs::*"))
    async with serve(reload_interval=0.02) as bus:
        assert await decide(bus, "fs::read") == "deny"
        (tmp_path / "permissions.yaml").unlink()
        await wait_until(eventually(bus, "fs::read", "allow"), timeout=DEADLINE)
        assert (await status(bus))["source"] == "builtin"
        write(tmp_path / "permissions.yaml", rules("deny", function="fs::*"))
        await wait_until(eventually(bus, "fs::read", "deny"), timeout=DEADLINE)
        assert (await status(bus))["source"] == "file"


async def test_without_hot_reload_only_an_explicit_reload_reads_the_file(tmp_path: Path) -> None:
    path = tmp_path / "permissions.yaml"
    write(path, rules("allow"))
    async with serve(rules_path=str(path), reload_interval=0) as bus:
        write(path, rules("deny"))
        assert await decide(bus, "web::fetch") == "allow"
        assert (await status(bus))["reload_interval"] == 0
        reloaded = await bus.trigger("policy::reload", {})
        assert reloaded["generation"] == 2
        assert await decide(bus, "web::fetch") == "deny"


async def test_the_catalog_describes_the_functions(tmp_path: Path) -> None:
    path = tmp_path / "permissions.yaml"
    write(path, rules("allow"))
    async with serve(rules_path=str(path), reload_interval=0) as bus:
        infos = {info.function_id: info for info in await bus.list_functions()}
        check = infos[CHECK]
        assert check.worker == "policy"
        assert check.request_schema is not None
        assert set(check.request_schema["required"]) == {"function_id"}
        assert {"policy::status", "policy::reload"} <= set(infos)


async def test_removing_a_configured_file_keeps_the_rules_in_force(tmp_path: Path) -> None:
    path = tmp_path / "permissions.yaml"
    write(path, rules("allow"))
    async with serve(rules_path=str(path), reload_interval=0.02) as bus:
        path.unlink()

        async def reported() -> bool:
            return (await status(bus))["last_error"] is not None

        await wait_until(reported, timeout=DEADLINE)
        assert "no such file" in (await status(bus))["last_error"]["reason"]
        assert await decide(bus, "web::fetch") == "allow"
        assert (await status(bus))["source"] == "file"
        write(path, rules("deny"))
        await wait_until(eventually(bus, "web::fetch", "deny"), timeout=DEADLINE)
        assert (await status(bus))["last_error"] is None
