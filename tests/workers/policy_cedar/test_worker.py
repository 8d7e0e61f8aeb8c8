"""The ``policy-cedar`` worker on a bus: defaults, hot reload, status, and the swap."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from tackroom.engine import Engine, InvocationError, open_engine
from tackroom.runtime import HarnessConfig, Host, WorkerStartError, load_worker
from tackroom.testing import MEMORY_URL, wait_until

CHECK = "policy::check_permissions"
DEADLINE = 5.0

ALLOW_WEB = (
    '@id("web")\npermit (principal, action == Action::"call", resource in Namespace::"web");\n'
)
DENY_WEB = '@id("web")\nforbid (principal, action, resource in Namespace::"web");\n'
BROKEN = ALLOW_WEB + "\nforbid (principal, action, resource) when { context.x == };\n"


def write(path: Path, text: str) -> None:
    temporary = path.with_suffix(".tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


@asynccontextmanager
async def serve(name: str = "policy-cedar", **config: Any) -> AsyncIterator[Engine]:
    harness = HarnessConfig(schema_version=1, worker_config={name: config})
    spec = load_worker(name)
    async with Host(engine=open_engine(MEMORY_URL), workers=[spec], config=harness) as host:
        yield host.engine


async def decide(bus: Engine, function_id: str) -> str:
    reply = await bus.trigger(CHECK, {"function_id": function_id, "args": {}})
    return str(reply["decision"])


async def test_without_a_file_the_builtin_defaults_apply(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    async with serve(reload_interval=0) as bus:
        assert await decide(bus, "fs::read") == "allow"
        assert await decide(bus, "fs::write") == "needs_approval"
        status = await bus.trigger("policy::status", {})
        assert (status["language"], status["source"]) == ("cedar", "builtin")
        assert status["path"] == str(tmp_path / "policies.cedar")


async def test_a_bad_file_at_start_stops_the_worker(tmp_path: Path) -> None:
    path = tmp_path / "policies.cedar"
    path.write_text(BROKEN, encoding="utf-8")
    with pytest.raises(WorkerStartError, match=r"policies\.cedar:4: Cedar: "):
        async with serve(policies_path=str(path)):
            pass
    with pytest.raises(WorkerStartError, match="no such file"):
        async with serve(policies_path=str(tmp_path / "missing.cedar")):
            pass


async def test_hot_reload_and_a_rejected_file(tmp_path: Path) -> None:
    path = tmp_path / "policies.cedar"
    write(path, ALLOW_WEB)
    async with serve(policies_path=str(path), reload_interval=0.02) as bus:
        assert await decide(bus, "web::get") == "allow"
        write(path, DENY_WEB)

        async def denied() -> bool:
            return await decide(bus, "web::get") == "deny"

        await wait_until(denied, timeout=DEADLINE)
        write(path, BROKEN)

        async def rejected() -> bool:
            return (await bus.trigger("policy::status", {}))["last_error"] is not None

        await wait_until(rejected, timeout=DEADLINE)
        status = await bus.trigger("policy::status", {})
        assert status["last_error"]["line"] == 4
        assert await decide(bus, "web::get") == "deny"
        with pytest.raises(InvocationError) as caught:
            await bus.trigger("policy::reload", {})
        assert caught.value.remote_code == "policy_file_invalid"


@pytest.mark.parametrize("name", ["policy", "policy-cedar"])
async def test_both_workers_serve_the_same_function_ids(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    async with serve(name, reload_interval=0) as bus:
        ids = {info.function_id for info in await bus.list_functions() if info.worker == name}
        assert ids == {CHECK, "policy::authorize", "policy::status", "policy::reload"}
        assert await decide(bus, "fs::read") == "allow"
        assert await decide(bus, "policy::reload") == "deny"
