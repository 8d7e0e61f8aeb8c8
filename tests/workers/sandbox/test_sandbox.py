"""``sandbox::run`` and ``sandbox::status``: results, limits, working folders, levels."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from tackroom.contracts.sandbox import RunResult, StatusResponse
from tackroom.engine import Engine, InvocationError
from tackroom.testing import wait_until

from .conftest import processes_with, refused, requires_bwrap, run, sandbox_bus, sh


@requires_bwrap
async def test_results_exit_codes_stdin_and_files(root: Path) -> None:
    async with sandbox_bus(root) as bus:
        result = await sh(bus, "cat; echo err >&2; mkdir -p out; echo hé > out/f.txt; exit 3",
                          stdin="from stdin\n")  # fmt: skip
        assert RunResult.model_validate(result) == RunResult.model_validate(
            {**result, "exit_code": 3, "stdout": "from stdin\n", "stderr": "err\n"}
        )
        assert (result["signal"], result["timed_out"], result["level"]) == (None, False, "bwrap")
        assert (root / "s1" / "out" / "f.txt").read_text() == "hé\n"
        inside = await sh(bus, "pwd; cat f.txt", cwd="out")
        assert inside["stdout"] == "/workspace/out\nhé\n"
        env = await sh(bus, "echo $GREETING", env={"GREETING": "hi"})
        assert env["stdout"] == "hi\n"


@requires_bwrap
async def test_output_is_capped(root: Path) -> None:
    async with sandbox_bus(root, max_output_bytes=1000) as bus:
        result = await sh(bus, "head -c 300000 /dev/zero | tr '\\0' a; echo done >&2")
        assert result["stdout"] == "a" * 1000
        assert (result["stdout_truncated"], result["stderr_truncated"]) == (True, False)
        assert result["stderr"] == "done\n"
        assert result["exit_code"] == 0  # the rest was read, so the command never blocked
        smaller = await sh(bus, "echo 0123456789", max_output_bytes=4)
        assert (smaller["stdout"], smaller["stdout_truncated"]) == ("0123", True)
        larger = await sh(bus, "head -c 5000 /dev/zero", max_output_bytes=10**9)
        assert len(larger["stdout"]) == 1000  # never above the worker's cap


@requires_bwrap
async def test_cpu_and_file_size_limits_say_why(root: Path) -> None:
    async with sandbox_bus(root, cpu_seconds=1, max_file_bytes=4096) as bus:
        spin = await run(bus, ["python3", "-c", "while True: pass"])
        assert (spin["killed_reason"], spin["signal"]) == ("cpu_limit", 24)
        big = await sh(bus, "exec head -c 10000 /dev/zero > big")
        assert (big["killed_reason"], big["signal"]) == ("file_size_limit", 25)
        assert (root / "s1" / "big").stat().st_size == 4096


@requires_bwrap
async def test_bad_requests_are_refused(root: Path) -> None:
    async with sandbox_bus(root) as bus:
        await refused(bus, {"argv": ["true"], "cwd": "missing"}, "not_found")
        await sh(bus, "touch file")
        await refused(bus, {"argv": ["true"], "cwd": "file"}, "not_a_directory")
        for session in ("..", "a/b", ".tackroom-root", ""):
            with pytest.raises(InvocationError) as caught:
                await run(bus, ["true"], session=session)
            assert caught.value.remote_code == "invalid_request"
        await refused(bus, {"argv": []}, "invalid_request")
        await refused(bus, {"argv": ["true"], "env": {"A=B": "x"}}, "invalid_request")
        await refused(bus, {"argv": ["true"], "timeout_seconds": 0}, "invalid_request")
        assert os.listdir(root) == ["s1"]


@requires_bwrap
async def test_status_of_the_bwrap_level(root: Path) -> None:
    async with sandbox_bus(root, memory_mb=512) as bus:
        status = StatusResponse.model_validate(await bus.trigger("sandbox::status", {}))
    assert (status.level, status.available, status.network) == ("bwrap", True, False)
    assert status.limits.memory_mb == 512
    expected = "cgroup" if os.geteuid() == 0 else ("cgroup", "rlimit")
    assert status.process_limit in expected
    assert "bubblewrap isolates each command" in status.reason


async def test_without_bubblewrap_every_call_is_refused(root: Path) -> None:
    async with sandbox_bus(root, bwrap="/nonexistent/bwrap") as bus:
        status = StatusResponse.model_validate(await bus.trigger("sandbox::status", {}))
        assert status.available is False
        assert "apt-get install bubblewrap" in status.reason
        assert "level: process" in status.reason
        message = await refused(bus, {"argv": ["touch", "ran"]}, "sandbox_unavailable")
        assert "apt-get install bubblewrap" in message
    assert not (root / "s1" / "ran").exists()


async def test_the_process_level_is_opt_in_and_says_it_does_not_isolate(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-process-level-secret")
    marker = f"{uuid.uuid4().int % 10**6}.{uuid.uuid4().int % 10**6}"
    async with sandbox_bus(root, level="process") as bus:
        status = await bus.trigger("sandbox::status", {})
        assert (status["level"], status["available"], status["network"]) == ("process", True, True)
        assert "NOT isolated" in status["reason"]
        result = await sh(bus, "pwd; env")
        assert result["level"] == "process", result
        assert result["stdout"].splitlines()[0] == str((root / "s1").resolve()), result
        assert "sk-process-level-secret" not in result["stdout"]
        late = await sh(bus, f"sleep {marker} & sleep {marker}", timeout_seconds=0.5)
        assert (late["timed_out"], late["killed_reason"]) == (True, "timeout")
    await wait_until(lambda: not processes_with(f"sleep\0{marker}"), message="a sleep survived")


async def _status(bus: Engine) -> StatusResponse:
    return StatusResponse.model_validate(await bus.trigger("sandbox::status", {}))
