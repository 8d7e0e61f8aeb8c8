"""The sandbox: what this host allows (found and probed once, on the first call), and running
one call.

At the ``bwrap`` level a call that cannot be isolated as configured is refused
(``sandbox_unavailable``, saying why and what to do) — never run with less isolation. The
``process`` level is the weaker one a config opts into.
"""

from __future__ import annotations

import asyncio
import shutil
import signal
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tackroom.contracts.sandbox import (
    NOT_A_DIRECTORY,
    NOT_FOUND,
    SANDBOX_UNAVAILABLE,
    KilledReason,
    RunRequest,
    RunResult,
    StatusResponse,
)
from tackroom.engine.errors import FunctionError
from tackroom.kit.workspace import checked_relative, resolve_inside, session_dir
from tackroom.workers.sandbox.argv import (
    PATH,
    HostLayout,
    RLimits,
    bwrap_argv,
    process_env,
    rlimit_argv,
    sandbox_env,
)
from tackroom.workers.sandbox.cgroups import CallCgroup
from tackroom.workers.sandbox.config import SandboxConfig
from tackroom.workers.sandbox.execute import Execution, execute
from tackroom.workers.sandbox.gate import GO, RELEASE, Gate
from tackroom.workers.sandbox.host import Limiting, find_layout, find_limiting, visible_program

__all__ = ["Sandbox", "outcome_of"]

_MIB = 1024 * 1024
_PROBE_TIMEOUT = 10.0
_INSTALL = "apt-get install bubblewrap"
_WEAKER = (
    "or opt into the weaker level with worker_config.sandbox.level: process, which does not"
    " isolate files or network"
)


@dataclass(frozen=True, slots=True)
class _Setup:
    available: bool
    reason: str
    limiting: Limiting
    layout: HostLayout | None
    bwrap: str


def outcome_of(returncode: int) -> tuple[int, int | None]:
    """The exit code in shell convention and the signal that ended the command, if one did
    (``bwrap`` and ``sh`` report a command killed by signal N as 128 + N)."""
    if returncode < 0:
        return 128 - returncode, -returncode
    if 128 < returncode <= 128 + 64:
        return returncode, returncode - 128
    return returncode, None


def _killed_reason(timed_out: bool, signal_number: int | None) -> KilledReason | None:
    if timed_out:
        return "timeout"
    if signal_number == signal.SIGXCPU:
        return "cpu_limit"
    if signal_number == signal.SIGXFSZ:
        return "file_size_limit"
    return None


class Sandbox:
    """One worker's sandbox: its config, what the host offers, and whether it can run.

    What the host offers is found (and, at the ``bwrap`` level, probed by running ``true``) by
    :meth:`ready`, which :meth:`run` calls: the first call pays for it (~40 ms), not the boot.
    It happens once — concurrent first calls wait for the same probe — and its outcome is kept,
    a refusal too: every call is then refused with the same reason. A first caller cancelled
    midway leaves nothing kept (the probe's process is killed), and the next call starts over.
    """

    def __init__(self, config: SandboxConfig) -> None:
        self.config = config
        self._setup: _Setup | None = None
        self._finding = asyncio.Lock()
        self._root = config.workspace_root.expanduser().absolute()

    @classmethod
    async def prepare(cls, config: SandboxConfig) -> Sandbox:
        """A sandbox that is already :meth:`ready`."""
        sandbox = cls(config)
        await sandbox.ready()
        return sandbox

    async def ready(self) -> None:
        """Find what the host offers and probe it, unless that is done already."""
        if self._setup is not None:
            return
        async with self._finding:
            if self._setup is None:
                self._setup = await self._find()

    async def _find(self) -> _Setup:
        setup = await asyncio.to_thread(_discover, self.config)
        if setup.available and self.config.level == "bwrap":
            return await self._probe(setup)
        return setup

    def _found(self) -> _Setup:
        if self._setup is None:
            raise RuntimeError("the sandbox is not ready: await Sandbox.ready() first")
        return self._setup

    # -- status ------------------------------------------------------------------------------
    def status(self) -> StatusResponse:
        """What :meth:`ready` found (it must have run)."""
        setup = self._found()
        return StatusResponse(
            level=self.config.level,
            available=setup.available,
            reason=setup.reason,
            network=self.config.network or self.config.level == "process",
            process_limit=setup.limiting.process_limit,
            limits=self.config.limits(),
        )

    # -- a call ------------------------------------------------------------------------------
    async def run(self, request: RunRequest) -> RunResult:
        await self.ready()
        setup = self._found()
        if not setup.available:
            raise FunctionError(SANDBOX_UNAVAILABLE, setup.reason)
        workspace, parts = await asyncio.to_thread(self._locate, request.session_id, request.cwd)
        cap = min(request.max_output_bytes or self.config.max_output_bytes,
                  self.config.max_output_bytes)  # fmt: skip
        execution = await self._launch(
            setup,
            workspace,
            parts,
            request.argv,
            env=request.env,
            stdin=None if request.stdin is None else request.stdin.encode("utf-8"),
            timeout=request.timeout_seconds or self.config.default_timeout,
            max_output=cap,
        )
        return _result(execution, self.config.level)

    def _locate(self, session_id: str, cwd: str) -> tuple[Path, tuple[str, ...]]:
        pure = checked_relative(cwd)
        base = session_dir(self._root, session_id, code="invalid_request")
        parts = resolve_inside(base, pure, cwd)
        target = base.joinpath(*parts)
        if not target.exists():
            raise FunctionError(NOT_FOUND, f"{cwd!r}: no such folder in the workspace")
        if not target.is_dir():
            raise FunctionError(NOT_A_DIRECTORY, f"{cwd!r} is not a folder")
        return base, parts

    def _limits(self) -> RLimits:
        config = self.config
        return RLimits(
            memory_bytes=config.memory_mb * _MIB,
            cpu_seconds=config.cpu_seconds,
            processes=config.max_processes,
            file_bytes=config.max_file_bytes,
            open_files=config.max_open_files,
        )

    async def _launch(
        self,
        setup: _Setup,
        workspace: Path,
        parts: Sequence[str],
        command: Sequence[str],
        *,
        env: dict[str, str],
        stdin: bytes | None,
        timeout: float,
        max_output: int,
    ) -> Execution:
        cgroup = self._new_cgroup(setup)
        gate = Gate(cgroup, bwrap=self.config.level == "bwrap") if cgroup else None
        try:
            if self.config.level == "bwrap":
                assert setup.layout is not None
                argv = bwrap_argv(
                    bwrap=setup.bwrap,
                    layout=setup.layout,
                    workspace=workspace,
                    cwd_parts=parts,
                    network=self.config.network,
                    env=sandbox_env(env),
                    limits=self._limits(),
                    tmp_bytes=self.config.tmp_mb * _MIB,
                    command=command,
                    block_fd=gate.block_r if gate else None,
                    info_fd=gate.info_w if gate else None,
                )
                cwd, spawn_env = Path("/"), {"PATH": PATH}
            else:
                argv = [*rlimit_argv(_prlimit(setup), self._limits()), *command]
                if gate is not None:
                    argv = ["/bin/sh", "-c", RELEASE, "sh", *argv]
                    stdin = GO + (stdin or b"")
                cwd, spawn_env = workspace.joinpath(*parts), process_env(env, home=workspace)
            return await self._execute(
                argv,
                cwd=cwd,
                env=spawn_env,
                stdin=stdin,
                timeout=timeout,
                max_output=max_output,
                pass_fds=gate.child_fds if gate else (),
                started=gate.admit if gate else None,
                kill_rest=cgroup.kill if cgroup else None,
            )
        finally:
            if gate is not None:
                gate.close()
            if cgroup is not None:
                await cgroup.close()

    @staticmethod
    async def _execute(argv: list[str], **options: Any) -> Execution:
        try:
            return await execute(argv, **options)
        except OSError as exc:  # the program itself could not be started
            raise FunctionError(
                SANDBOX_UNAVAILABLE, f"cannot start {argv[0]}: {exc.strerror or exc}"
            ) from None

    def _new_cgroup(self, setup: _Setup) -> CallCgroup | None:
        cgroups = setup.limiting.cgroups
        if cgroups is None:
            return None
        try:
            return cgroups.create(
                max_processes=self.config.max_processes,
                memory_bytes=self.config.memory_mb * _MIB,
            )
        except OSError as exc:
            raise FunctionError(
                SANDBOX_UNAVAILABLE, f"cannot make the call's pids cgroup: {exc.strerror or exc}"
            ) from None

    async def _probe(self, setup: _Setup) -> _Setup:
        """``setup``, or why it cannot run: ``true`` run once as every call will be."""
        with tempfile.TemporaryDirectory(prefix="tackroom-sandbox-probe-") as folder:
            try:
                execution = await self._launch(
                    setup,
                    Path(folder), (), ["true"], env={}, stdin=None,
                    timeout=_PROBE_TIMEOUT, max_output=4096,
                )  # fmt: skip
            except (OSError, FunctionError) as exc:
                return _unavailable(setup, f"bwrap cannot start here: {exc}; {_WEAKER}")
        if execution.returncode == 0:
            return setup
        said = execution.stderr.decode("utf-8", "replace").strip().splitlines()
        why = said[-1] if said else f"exit code {execution.returncode}"
        return _unavailable(
            setup,
            f"bwrap cannot create the sandbox here ({why}): it needs user namespaces (check"
            " sysctl kernel.unprivileged_userns_clone and AppArmor's"
            f" restrict_unprivileged_userns); {_WEAKER}",
        )


def _prlimit(setup: _Setup) -> str:
    return setup.layout.prlimit if setup.layout else "prlimit"


def _unavailable(setup: _Setup, reason: str) -> _Setup:
    return _Setup(False, reason, setup.limiting, setup.layout, setup.bwrap)


def _discover(config: SandboxConfig) -> _Setup:
    prlimit = visible_program("prlimit")
    limiting = find_limiting()
    layout = find_layout(network=config.network, prlimit=prlimit) if prlimit else None
    if config.level == "process":
        if not prlimit:
            return _Setup(
                False, "prlimit is missing: apt-get install util-linux", limiting, None, ""
            )
        return _Setup(
            True,
            "level: process (opted in): commands run in the workspace with a cleared"
            " environment, rlimits and a timeout, but NOT isolated: they see the host's files"
            f" and network; processes: {limiting.reason}",
            limiting,
            layout,
            "",
        )
    bwrap = shutil.which(config.bwrap) or ""
    if not bwrap:
        reason = f"bubblewrap ({config.bwrap}) is not installed: {_INSTALL}, {_WEAKER}"
        return _Setup(False, reason, limiting, layout, "")
    if not prlimit:
        reason = f"prlimit is missing: apt-get install util-linux, {_WEAKER}"
        return _Setup(False, reason, limiting, layout, bwrap)
    if limiting.process_limit == "none":
        return _Setup(False, f"{limiting.reason}; {_WEAKER}", limiting, layout, bwrap)
    network = "shared with the host" if config.network else "none"
    return _Setup(
        True,
        "bubblewrap isolates each command: its own namespaces (network: "
        f"{network}), a read-only system, the workspace the only writable folder, no"
        f" capabilities, a cleared environment; processes: {limiting.reason}",
        limiting,
        layout,
        bwrap,
    )


def _result(execution: Execution, level: Any) -> RunResult:
    exit_code, signal_number = outcome_of(execution.returncode)
    return RunResult(
        exit_code=exit_code,
        signal=signal_number,
        stdout=execution.stdout.decode("utf-8", "replace"),
        stderr=execution.stderr.decode("utf-8", "replace"),
        stdout_truncated=execution.stdout_truncated,
        stderr_truncated=execution.stderr_truncated,
        timed_out=execution.timed_out,
        killed_reason=_killed_reason(execution.timed_out, signal_number),
        duration_ms=round(execution.duration * 1000, 3),
        level=level,
    )
