"""The ``shell`` worker's tools, ``shell::run`` and ``code::python``, on the real sandbox."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tackroom.contracts.sandbox import CommandResult
from tackroom.contracts.tools import traits_of
from tackroom.engine import Engine, InvocationError, open_engine
from tackroom.runtime import HarnessConfig, Host, WorkerSpec
from tackroom.testing.engines import MEMORY_URL
from tackroom.workers.files.worker import WORKER as FILES
from tackroom.workers.sandbox.worker import WORKER as SANDBOX
from tackroom.workers.shell.worker import WORKER as SHELL

requires_bwrap = pytest.mark.skipif(
    shutil.which("bwrap") is None,
    reason="bubblewrap is not installed (apt-get install bubblewrap; make setup installs it)",
)


@pytest.fixture
async def bus(tmp_path: Path) -> AsyncIterator[Engine]:
    root = str(tmp_path / "workspaces")
    config = HarnessConfig(
        schema_version=1,
        worker_config={"sandbox": {"workspace_root": root}, "files": {"workspace_root": root}},
    )
    workers: list[WorkerSpec[Any]] = [SANDBOX, SHELL, FILES]
    async with Host(engine=open_engine(MEMORY_URL), workers=workers, config=config) as host:
        yield host.engine


def call(session: str = "s1", **arguments: Any) -> dict[str, Any]:
    return {**arguments, "_call": {"session_id": session, "function_call_id": "c1"}}


async def fails(engine: Engine, function_id: str, payload: Any, code: str) -> str:
    with pytest.raises(InvocationError) as caught:
        await engine.trigger(function_id, payload, timeout=30)
    assert caught.value.remote_code == code, caught.value
    return caught.value.message


@requires_bwrap
async def test_shell_edits_are_what_fs_read_sees(bus: Engine) -> None:
    await bus.trigger("fs::write", call(path="notes.txt", content="one\n"))
    edited = await bus.trigger(
        "shell::run", call(command="sed -i s/one/two/ notes.txt && cat notes.txt")
    )
    assert CommandResult.model_validate(edited).stdout == "two\n"
    assert set(edited) == set(CommandResult.model_fields) - {"label"}  # no level, no label
    read = await bus.trigger("fs::read", call(path="notes.txt"))
    assert read["content"] == "two\n"
    inside = await bus.trigger("shell::run", call(command="mkdir -p d && cd d && pwd"))
    assert inside["stdout"] == "/workspace/d\n"
    sub = await bus.trigger("shell::run", call(command="pwd; cat", cwd="d", stdin="in"))
    assert sub["stdout"] == "/workspace/d\nin"


@requires_bwrap
async def test_a_failing_command_is_a_result(bus: Engine) -> None:
    result = await bus.trigger("shell::run", call(command="echo oops >&2; exit 4"))
    assert (result["exit_code"], result["stderr"], result["timed_out"]) == (4, "oops\n", False)
    late = await bus.trigger("shell::run", call(command="echo a; sleep 30", timeout_seconds=0.5))
    assert (late["timed_out"], late["killed_reason"], late["stdout"]) == (True, "timeout", "a\n")


@requires_bwrap
async def test_python_runs_in_the_workspace(bus: Engine) -> None:
    await bus.trigger(
        "fs::write", call(path="mathx.py", content="def double(x):\n    return 2 * x\n")
    )
    code = "import mathx, sys\nassert mathx.double(21) == 42\nprint(sys.stdin.read().upper())"
    result = await bus.trigger("code::python", call(code=code, stdin="quiet"))
    assert (result["exit_code"], result["stdout"]) == (0, "QUIET\n")
    listed = await bus.trigger("fs::list", call())
    assert [entry["name"] for entry in listed["entries"]] == ["mathx.py"]  # no __pycache__
    broken = await bus.trigger("code::python", call(code="1 / 0"))
    assert broken["exit_code"] == 1
    assert "ZeroDivisionError" in broken["stderr"]


@requires_bwrap
async def test_the_sandbox_refusals_reach_the_caller(bus: Engine) -> None:
    message = await fails(
        bus, "shell::run", call(command="true", cwd="../s2"), "path_outside_workspace"
    )
    assert "'..' is not allowed" in message
    await fails(bus, "shell::run", {"command": "true"}, "no_call_context")
    await fails(bus, "code::python", call(session="..", code="1"), "no_call_context")
    await fails(bus, "shell::run", call(command="true", extra=1), "invalid_request")
    await fails(bus, "shell::run", call(command="x" * 100_001), "invalid_request")


async def test_traits_are_published(bus: Engine) -> None:
    catalog = {f.function_id: f for f in await bus.list_functions()}
    for function_id in ("shell::run", "code::python"):
        traits = traits_of(catalog[function_id].request_schema)
        assert (traits.idempotent, traits.parallel, traits.read_only) == (False, False, False)
        assert traits.timeout == 630.0
        response = catalog[function_id].response_schema or {}
        assert "timed_out" in response.get("properties", {})


async def test_without_a_sandbox_worker_the_tools_say_so(tmp_path: Path) -> None:
    async with Host(engine=open_engine(MEMORY_URL), workers=[SHELL]) as host:
        message = await fails(
            host.engine, "shell::run", call(command="true"), "sandbox_unavailable"
        )
    assert "no worker serves sandbox::run" in message
