"""What the host offers a sandbox, found once (by the worker's first call): programs, the file
layout, a process limit that holds. Blocking; the worker runs these in a thread."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from tackroom.workers.sandbox.argv import ETC_FILES, NETWORK_ETC_FILES, HostLayout
from tackroom.workers.sandbox.cgroups import PidsCgroups, find_pids_cgroups

__all__ = ["IDENTITY", "TOP_LEVEL", "Limiting", "find_layout", "find_limiting", "visible_program"]

IDENTITY = Path(__file__).with_name("etc")
"""The ``passwd`` and ``group`` a sandbox sees."""
TOP_LEVEL = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
"""Top-level entries that are links into ``/usr`` on a merged-``/usr`` system, folders
elsewhere; recreated as they are on the host."""

ProcessLimit = Literal["cgroup", "rlimit", "none"]


def find_layout(*, network: bool, prlimit: str, root: Path = Path("/")) -> HostLayout:
    links: list[tuple[str, str]] = []
    read_only = ["/usr"]
    for name in TOP_LEVEL:
        path = root / name.lstrip("/")
        if path.is_symlink():
            links.append((name, os.readlink(path)))
        elif path.is_dir():
            read_only.append(name)
    wanted = ETC_FILES + (NETWORK_ETC_FILES if network else ())
    etc = tuple(name for name in wanted if (root / "etc" / name).exists())
    return HostLayout(
        links=tuple(links),
        read_only=tuple(read_only),
        etc=etc,
        identity=IDENTITY,
        prlimit=prlimit,
    )


def visible_program(name: str) -> str:
    """``name``'s absolute path if it is in a system folder a sandbox sees, else ``""``."""
    found = shutil.which(name, path="/usr/bin:/bin:/usr/sbin:/sbin")
    if found is None:
        return ""
    resolved = os.path.realpath(found)
    return found if any(resolved.startswith(f"{top}/") for top in ("/usr", *TOP_LEVEL)) else ""


@dataclass(frozen=True, slots=True)
class Limiting:
    """How ``max_processes`` is enforced here, and with what."""

    process_limit: ProcessLimit
    cgroups: PidsCgroups | None
    reason: str


def find_limiting(*, euid: int | None = None) -> Limiting:
    """A pids cgroup per call where one can be made; otherwise ``RLIMIT_NPROC``, which holds
    for any uid but root (the command's own user namespace counts only its processes); for root
    without a cgroup, nothing (``reason`` says why)."""
    cgroups, why = find_pids_cgroups()
    if cgroups is not None:
        return Limiting("cgroup", cgroups, why)
    if (os.geteuid() if euid is None else euid) != 0:
        return Limiting("rlimit", None, f"RLIMIT_NPROC (no pids cgroup: {why})")
    return Limiting(
        "none",
        None,
        "the worker runs as root, for which the kernel does not enforce RLIMIT_NPROC, and no"
        f" pids cgroup can be made ({why}), so a fork bomb could not be contained: run the"
        " worker as an unprivileged user, or give it a cgroup with the pids controller",
    )
