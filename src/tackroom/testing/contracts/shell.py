"""The contract of a shell worker (the ``shell::run`` and ``code::python`` tools), by function id.

Any worker that replaces ``shell`` proves it fits by running this suite: subclass
:class:`ShellContract` in a ``test_*.py`` module, name the worker, and — if its config differs —
say how to run commands in the session workspaces under a given folder
(:meth:`ShellContract.configure`), and which workers it needs beside it
(:meth:`ShellContract.companions`)::

    class TestMyShell(ShellContract):
        worker_name = "my-shell"

        def companions(self, workspace_root):
            return []  # runs commands itself: no sandbox worker needed

The shipped ``shell`` runs its commands through ``sandbox::run``, so by default the suite starts
the shipped ``sandbox`` worker beside it (at its default ``bwrap`` level: bubblewrap must be
installed) with the same ``workspace_root``. A command works in the calling session's workspace,
``<workspace_root>/<session_id>/``, found from the ``_call`` context: what the suite writes there
on disk the command sees, and what the command writes is there. A command that ran is a result
whatever its exit code, and so is one killed at its timeout (``timed_out: true``); a working
folder outside the workspace is refused with ``path_outside_workspace``. Isolation itself is the
sandbox's contract (:class:`~tackroom.testing.contracts.SandboxContract`). Commands are POSIX
``sh`` command lines; snippets are Python 3.
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest

from tackroom.contracts.sandbox import (
    CODE_PYTHON,
    MAX_TIMEOUT,
    NO_CALL_CONTEXT,
    NOT_FOUND,
    PATH_OUTSIDE_WORKSPACE,
    SHELL_RUN,
    CommandResult,
)
from tackroom.contracts.tools import traits_of
from tackroom.engine import Engine
from tackroom.runtime.registry import load_worker
from tackroom.runtime.worker import WorkerSpec
from tackroom.testing.contracts.base import WorkerContract

__all__ = ["ShellContract"]

RUN, PYTHON = SHELL_RUN.id, CODE_PYTHON.id


def in_session(session: str = "s1", **arguments: Any) -> dict[str, Any]:
    """A tool call's payload: the model's arguments and the ``_call`` context of ``session``."""
    return {**arguments, "_call": {"session_id": session, "function_call_id": "c1"}}


class ShellContract(WorkerContract):
    worker_name: ClassVar[str] = "shell"

    def configure(self, workspace_root: Path) -> dict[str, Any]:
        """The worker's config section, for workspaces under ``workspace_root`` (the shipped
        worker's are its sandbox's: see :meth:`companions`)."""
        return {}

    def companions(self, workspace_root: Path) -> Sequence[tuple[WorkerSpec[Any], dict[str, Any]]]:
        """The workers (and their config sections) the suite starts beside the worker under test:
        by default the shipped ``sandbox``, with its workspaces under ``workspace_root``."""
        return [(load_worker("sandbox"), {"workspace_root": str(workspace_root)})]

    @pytest.fixture
    def root(self, tmp_path: Path) -> Path:
        return tmp_path / "workspaces"

    @pytest.fixture
    async def bus(self, engine_url: str, root: Path) -> AsyncIterator[Engine]:
        """The worker under test, with its companions beside it."""
        companions = self.companions(root)
        async with self.hosted(
            engine_url,
            self.configure(root),
            beside=[spec for spec, _ in companions],
            beside_config={spec.name: config for spec, config in companions},
        ) as engine:
            yield engine

    async def run(self, bus: Engine, function_id: str, **arguments: Any) -> CommandResult:
        session = arguments.pop("session", "s1")
        reply = await self.call(bus, function_id, in_session(session, **arguments))
        assert isinstance(reply, dict)
        return CommandResult.model_validate(reply)

    async def workspace(self, bus: Engine, root: Path) -> Path:
        """Session ``s1``'s workspace folder on disk, made by a first command."""
        assert (await self.run(bus, RUN, command="true")).exit_code == 0
        workspace = root / "s1"
        assert workspace.is_dir()
        return workspace

    # -- results -------------------------------------------------------------------------------
    async def test_output_and_a_failing_exit_code_are_the_result(self, bus: Engine) -> None:
        result = await self.run(bus, RUN, command="cat; echo oops >&2; exit 3", stdin="héllo\n")
        assert (result.exit_code, result.stdout, result.stderr) == (3, "héllo\n", "oops\n")
        assert (result.timed_out, result.killed_reason) == (False, None)
        assert (result.stdout_truncated, result.stderr_truncated) == (False, False)
        ok = await self.run(bus, RUN, command="printf '%s' done")
        assert (ok.exit_code, ok.stdout, ok.stderr) == (0, "done", "")

    async def test_a_command_past_its_timeout_is_killed_and_says_so(self, bus: Engine) -> None:
        started = time.monotonic()
        result = await self.run(
            bus, RUN, command="echo started; sleep 30; echo never", timeout_seconds=0.5
        )
        assert time.monotonic() - started < 15  # not the command's 30 s
        assert (result.timed_out, result.killed_reason) == (True, "timeout")
        assert result.stdout == "started\n"
        assert result.exit_code != 0

    # -- the workspace -------------------------------------------------------------------------
    async def test_commands_run_in_the_sessions_workspace(self, bus: Engine, root: Path) -> None:
        workspace = await self.workspace(bus, root)
        (workspace / "sub").mkdir()
        (workspace / "sub" / "given.txt").write_text("from the host\n", encoding="utf-8")
        made = await self.run(bus, RUN, command="cat sub/given.txt; echo made > made.txt")
        assert (made.exit_code, made.stdout) == (0, "from the host\n")
        assert (workspace / "made.txt").read_text(encoding="utf-8") == "made\n"
        inside = await self.run(bus, RUN, command="cat given.txt && ls ..", cwd="sub")
        assert inside.stdout.splitlines()[0] == "from the host"
        assert {"made.txt", "sub"} <= set(inside.stdout.splitlines()[1:])
        other = await self.run(bus, RUN, command="cat made.txt", session="s2")
        assert other.exit_code != 0  # another session's workspace is another folder
        assert not (root / "s2" / "made.txt").exists()

    async def test_working_folders_outside_the_workspace_are_refused(
        self, bus: Engine, root: Path, tmp_path: Path
    ) -> None:
        outside = tmp_path / "outside"
        outside.mkdir()
        workspace = await self.workspace(bus, root)
        (workspace / "out").symlink_to(outside)
        for cwd in ("..", "../s2", "sub/../..", "/", str(outside), "out"):
            payload = in_session(command="echo pwned > pwned.txt", cwd=cwd)
            code = await self.code_of(bus, RUN, payload)
            assert code == PATH_OUTSIDE_WORKSPACE, cwd
        assert list(outside.iterdir()) == []
        assert not (root / "pwned.txt").exists()
        missing = await self.code_of(bus, RUN, in_session(command="true", cwd="missing"))
        assert missing == NOT_FOUND

    # -- python --------------------------------------------------------------------------------
    async def test_python_snippets_run_in_the_workspace(self, bus: Engine, root: Path) -> None:
        workspace = await self.workspace(bus, root)
        (workspace / "mathx.py").write_text("def double(x):\n    return 2 * x\n", "utf-8")
        code = "import mathx, sys\nprint(mathx.double(21), sys.stdin.read().upper())"
        result = await self.run(bus, PYTHON, code=code, stdin="quiet")
        assert (result.exit_code, result.stdout, result.timed_out) == (0, "42 QUIET\n", False)
        broken = await self.run(bus, PYTHON, code="open('wrote.txt', 'w').write('x')\n1 / 0")
        assert broken.exit_code != 0
        assert "ZeroDivisionError" in broken.stderr
        assert (workspace / "wrote.txt").read_text(encoding="utf-8") == "x"

    # -- refusals ------------------------------------------------------------------------------
    async def test_bad_requests_are_refused(self, bus: Engine, root: Path) -> None:
        for function_id, payload in (
            (RUN, in_session()),  # no command
            (RUN, in_session(command="")),
            (RUN, in_session(command="true", shell="bash")),
            (RUN, in_session(command="true", timeout_seconds=0)),
            (RUN, in_session(command="true", timeout_seconds=MAX_TIMEOUT + 1)),
            (PYTHON, in_session(code="print(1)", cwd="sub")),
        ):
            code = await self.code_of(bus, function_id, payload)
            assert code == "invalid_request", payload
        for function_id, payload in (
            (RUN, {"command": "touch ran.txt"}),  # no _call context: no session, no workspace
            (RUN, in_session("..", command="touch ran.txt")),
            (PYTHON, in_session("a/b", code="open('ran.txt', 'w')")),
        ):
            code = await self.code_of(bus, function_id, payload)
            assert code == NO_CALL_CONTEXT, payload
        assert not any("ran.txt" in files for _, _, files in os.walk(root))

    async def test_the_tools_are_published_with_their_traits(self, bus: Engine) -> None:
        infos = {info.function_id: info for info in await bus.list_functions()}
        for function_id, field in ((RUN, "command"), (PYTHON, "code")):
            info = infos[function_id]
            assert info.description
            schema = info.request_schema or {}
            assert field in schema["properties"]
            assert "_call" not in schema["properties"]
            traits = traits_of(schema)
            assert (traits.read_only, traits.idempotent, traits.parallel) == (False, False, False)
            assert traits.timeout is not None
            assert traits.timeout > MAX_TIMEOUT  # the sandbox's kill answers before the call's
