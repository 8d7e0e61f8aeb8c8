"""The contract of a sandbox worker (``sandbox::run``, ``sandbox::status``), by function id.

Any worker that replaces ``sandbox`` (a container runtime, a remote machine) proves it fits by
running this suite: subclass :class:`SandboxContract` in a ``test_*.py`` module, name the worker,
and — if its config differs — say how to put its workspaces under a folder with a given output
limit (:meth:`SandboxContract.config`)::

    class TestMySandbox(SandboxContract):
        worker_name = "my-sandbox"

The suite is for an isolating sandbox: it checks that a command works in
``<workspace_root>/<session_id>/`` and nowhere else, sees none of the worker's environment, and is
killed at its timeout. (The shipped worker's weaker ``process`` level does not pass it, by
design.) Commands are POSIX ``sh`` command lines.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from tackroom.contracts.sandbox import (
    LEVELS,
    SANDBOX_RUN,
    SANDBOX_STATUS,
    RunResult,
    StatusResponse,
)
from tackroom.engine import Engine
from tackroom.testing.contracts.base import WorkerContract

__all__ = ["SandboxContract"]

RUN = SANDBOX_RUN.id
LIMIT = 2048
"""The output limit (bytes per stream) the suite configures."""
SECRET = "sk-tackroom-sandbox-contract-secret"


class SandboxContract(WorkerContract):
    worker_name: ClassVar[str] = "sandbox"

    def config(self, *, workspace_root: Path, max_output_bytes: int = LIMIT) -> dict[str, Any]:
        """The worker's config section: workspaces under ``workspace_root``, this output cap."""
        return {"workspace_root": str(workspace_root), "max_output_bytes": max_output_bytes}

    @pytest.fixture
    def root(self, tmp_path: Path) -> Path:
        return tmp_path / "workspaces"

    @pytest.fixture
    async def bus(
        self, engine_url: str, root: Path, monkeypatch: pytest.MonkeyPatch
    ) -> AsyncIterator[Engine]:
        """The worker, started with a provider key in its environment that no command may see."""
        monkeypatch.setenv("OPENAI_API_KEY", SECRET)
        async with self.hosted(engine_url, self.config(workspace_root=root)) as engine:
            yield engine

    async def sh(self, bus: Engine, command: str, **fields: Any) -> dict[str, Any]:
        fields.setdefault("session_id", "s1")
        reply = await self.call(bus, RUN, {"argv": ["/bin/sh", "-c", command], **fields})
        RunResult.model_validate(reply)
        assert isinstance(reply, dict)
        return reply

    # -- status --------------------------------------------------------------------------------
    async def test_status_says_the_level_and_that_it_can_run(self, bus: Engine) -> None:
        status = StatusResponse.model_validate(await self.call(bus, SANDBOX_STATUS.id, {}))
        assert status.available, status.reason
        assert status.level in LEVELS
        assert status.reason
        assert status.limits.max_output_bytes == LIMIT

    # -- results -------------------------------------------------------------------------------
    async def test_exit_code_output_and_stdin_are_the_result(self, bus: Engine) -> None:
        reply = await self.sh(bus, "cat; echo oops >&2; exit 3", stdin="héllo\n")
        assert (reply["exit_code"], reply["stdout"], reply["stderr"]) == (3, "héllo\n", "oops\n")
        assert (reply["timed_out"], reply["killed_reason"], reply["signal"]) == (False, None, None)
        assert (reply["stdout_truncated"], reply["stderr_truncated"]) == (False, False)
        assert reply["schema_version"] == 1

    async def test_output_beyond_the_limit_is_cut_and_flagged(self, bus: Engine) -> None:
        reply = await self.sh(
            bus, "i=0; while [ $i -lt 1000 ]; do echo 0123456789; i=$((i+1)); done"
        )
        assert reply["stdout"] == ("0123456789\n" * 1000)[:LIMIT]
        assert reply["stdout_truncated"] is True
        assert reply["exit_code"] == 0
        short = await self.sh(bus, "echo 0123456789", max_output_bytes=4)
        assert (short["stdout"], short["stdout_truncated"]) == ("0123", True)

    async def test_a_command_past_its_timeout_is_killed(self, bus: Engine) -> None:
        reply = await self.sh(bus, "echo started; sleep 30; echo never", timeout_seconds=0.5)
        assert reply["timed_out"] is True
        assert reply["killed_reason"] == "timeout"
        assert reply["stdout"] == "started\n"
        assert reply["exit_code"] != 0

    # -- the workspace -------------------------------------------------------------------------
    async def test_commands_work_in_the_sessions_workspace(self, bus: Engine, root: Path) -> None:
        await self.sh(bus, "mkdir -p sub && echo from-s1 > sub/made.txt")
        assert (root / "s1" / "sub" / "made.txt").read_text() == "from-s1\n"
        (root / "s1" / "sub" / "given.txt").write_text("from the host\n")
        inside = await self.sh(bus, "cat given.txt; cat made.txt", cwd="sub")
        assert inside["stdout"] == "from the host\nfrom-s1\n"
        home = await self.sh(bus, 'cd "$HOME" && cat sub/given.txt')
        assert home["stdout"] == "from the host\n"
        other = await self.sh(bus, "cat sub/made.txt", session_id="s2")
        assert other["exit_code"] != 0  # another session's workspace is another folder

    @pytest.mark.parametrize("cwd", ["..", "../s2", "/", "/etc", "sub/../.."])
    async def test_working_folders_outside_the_workspace_are_refused(
        self, bus: Engine, cwd: str
    ) -> None:
        failure = await self.failure(bus, RUN, {"session_id": "s1", "argv": ["true"], "cwd": cwd})
        assert failure.remote_code == "path_outside_workspace"

    async def test_a_symlink_out_is_no_way_out(
        self, bus: Engine, root: Path, tmp_path: Path
    ) -> None:
        outside = tmp_path / "outside"
        outside.mkdir()
        (outside / "secret.txt").write_text("secret")
        await self.sh(bus, "true")
        (root / "s1" / "out").symlink_to(outside)
        failure = await self.failure(bus, RUN, {"session_id": "s1", "argv": ["true"], "cwd": "out"})
        assert failure.remote_code == "path_outside_workspace"
        reply = await self.sh(bus, "cat out/secret.txt; echo pwned > out/new.txt")
        assert "secret" not in reply["stdout"]
        assert sorted(os.listdir(outside)) == ["secret.txt"]

    async def test_nothing_outside_the_workspace_is_written(
        self, bus: Engine, tmp_path: Path
    ) -> None:
        target = tmp_path / "escaped.txt"
        await self.sh(bus, f"echo pwned > '{target}'; echo pwned > '{tmp_path}/../escaped.txt'")
        assert "escaped.txt" not in os.listdir(tmp_path)
        assert "escaped.txt" not in os.listdir(tmp_path.parent)

    async def test_missing_folders_and_bad_sessions_are_refused(self, bus: Engine) -> None:
        missing = await self.failure(
            bus, RUN, {"session_id": "s1", "argv": ["true"], "cwd": "missing"}
        )
        assert missing.remote_code == "not_found"
        for session in ("..", "a/b"):
            bad = await self.failure(bus, RUN, {"session_id": session, "argv": ["true"]})
            assert bad.remote_code == "invalid_request"

    # -- the environment -----------------------------------------------------------------------
    async def test_only_the_calls_environment_reaches_the_command(self, bus: Engine) -> None:
        reply = await self.sh(bus, "env", env={"GREETING": "hi"})
        assert "GREETING=hi" in reply["stdout"].splitlines()
        assert SECRET not in reply["stdout"]
        assert "OPENAI_API_KEY" not in reply["stdout"]
