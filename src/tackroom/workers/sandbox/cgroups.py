"""A pids cgroup per call, where one can be made: the process limit that holds for root.

``RLIMIT_NPROC`` does not bind a process whose real uid is root on the host (the kernel exempts
it), and a sandbox started by a root worker runs as host uid 0 in its own user namespace. So a
root worker contains fork bombs with the ``pids`` controller: a folder of its own under the
worker's cgroup, ``tackroom-sandbox/``, and in it one child per call with ``pids.max`` set, into
which the sandbox's first process is moved before it runs anything (everything it starts is
counted there), and which is emptied (every process killed) and removed when the call ends.

Both cgroup versions: a v1 ``pids`` hierarchy, or v2 where the worker's cgroup delegates
``pids`` to its children (``memory.max`` is set too where v2 offers ``memory``). Where neither is
writable, :func:`find_pids_cgroups` says why and the caller decides.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import signal
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CallCgroup", "PidsCgroups", "find_pids_cgroups"]

_log = logging.getLogger("tackroom.workers.sandbox")

BASE = "tackroom-sandbox"
_STALE_AFTER = 300.0
"""A call cgroup older than this with no process left is a crashed worker's; removed when
the cgroups are first looked for."""


@dataclass(frozen=True, slots=True)
class PidsCgroups:
    """The folder under which each call gets its own pids cgroup."""

    base: Path
    version: int

    def create(self, *, max_processes: int, memory_bytes: int | None) -> CallCgroup:
        """A new, empty cgroup limited to ``max_processes`` (and ``memory_bytes`` where the
        memory controller is there). Blocking, but a few writes to a pseudo filesystem."""
        path = self.base / uuid.uuid4().hex[:16]
        path.mkdir()
        try:
            (path / "pids.max").write_text(str(max_processes))
            memory = path / "memory.max"
            if memory_bytes is not None and memory.exists():
                memory.write_text(str(memory_bytes))
        except OSError:
            with contextlib.suppress(OSError):
                path.rmdir()
            raise
        return CallCgroup(path)


class CallCgroup:
    """One call's cgroup: processes are added by pid, killed all at once, then it is removed."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def add(self, pid: int) -> None:
        (self.path / "cgroup.procs").write_text(str(pid))

    def pids(self) -> list[int]:
        try:
            text = (self.path / "cgroup.procs").read_text()
        except FileNotFoundError:
            return []
        return [int(line) for line in text.split()]

    def kill(self) -> None:
        """SIGKILL every process in the cgroup (at once with v2's ``cgroup.kill``)."""
        with contextlib.suppress(FileNotFoundError, PermissionError):
            (self.path / "cgroup.kill").write_text("1")
            return
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)

    async def close(self, *, grace: float = 2.0) -> None:
        """Kill what is left, wait for the cgroup to empty, remove it."""
        deadline = time.monotonic() + grace
        while True:
            self.kill()
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError as exc:
                if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                    _log.warning("sandbox: cgroup %s not removed: %s", self.path, exc)
                    return
            await asyncio.sleep(0.005)


def _own_cgroups(text: str) -> dict[str, str]:
    """``/proc/self/cgroup`` as {controller (``""`` for v2): path}."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        _, controllers, path = line.split(":", 2)
        for name in controllers.split(",") if controllers else [""]:
            found[name] = path
    return found


def _mounts(text: str) -> list[tuple[str, str, set[str]]]:
    """``/proc/self/mountinfo`` as (mount point, fs type, super options) of cgroup mounts."""
    found = []
    for line in text.splitlines():
        before, _, after = line.partition(" - ")
        fields, tail = before.split(), after.split()
        if len(fields) >= 5 and len(tail) >= 3 and tail[0] in {"cgroup", "cgroup2"}:
            found.append((fields[4], tail[0], set(tail[2].split(","))))
    return found


def _locate(mountinfo: str, own: str) -> tuple[Path, int] | None:
    """The worker's own pids cgroup folder and the hierarchy's version."""
    cgroups = _own_cgroups(own)
    for point, kind, options in _mounts(mountinfo):
        if kind == "cgroup" and "pids" in options and "pids" in cgroups:
            return Path(point) / cgroups["pids"].lstrip("/"), 1
    for point, kind, _ in _mounts(mountinfo):
        if kind == "cgroup2" and "" in cgroups:
            return Path(point) / cgroups[""].lstrip("/"), 2
    return None


def _prepare(folder: Path, version: int) -> Path:
    base = folder / BASE
    base.mkdir(exist_ok=True)
    if version == 2:
        wanted = {"pids", "memory"} & set((base / "cgroup.controllers").read_text().split())
        if "pids" not in wanted:
            raise OSError(errno.ENOTSUP, f"{folder} does not delegate the pids controller")
        (base / "cgroup.subtree_control").write_text(" ".join(f"+{name}" for name in wanted))
    _sweep(base)
    return base


def _sweep(base: Path) -> None:
    now = time.time()
    for child in base.iterdir():
        with contextlib.suppress(OSError):
            if child.is_dir() and now - child.stat().st_mtime > _STALE_AFTER:
                child.rmdir()  # EBUSY while processes are in it


def find_pids_cgroups() -> tuple[PidsCgroups | None, str]:
    """A writable pids hierarchy for this process's calls, or ``None`` and why not. Blocking."""
    try:
        located = _locate(
            Path("/proc/self/mountinfo").read_text(), Path("/proc/self/cgroup").read_text()
        )
    except OSError as exc:
        return None, f"cannot read this process's cgroups: {exc.strerror or exc}"
    if located is None:
        return None, "no cgroup hierarchy with the pids controller is mounted"
    folder, version = located
    try:
        base = _prepare(folder, version)
        probe = PidsCgroups(base, version).create(max_processes=1, memory_bytes=None)
        probe.path.rmdir()
    except OSError as exc:
        return None, f"cannot make a pids cgroup under {folder}: {exc.strerror or exc}"
    return PidsCgroups(base, version), f"a pids cgroup per call under {base}"
