"""The command lines the sandbox runs: pure functions of the host layout, the limits and a call.

At the ``bwrap`` level a call runs as::

    bwrap <namespaces, mounts, environment> -- /usr/bin/prlimit <limits> -- <argv>

- every namespace unshared (``--unshare-all``: user, mount, pid, ipc, uts, cgroup, and network
  unless the config shares it), the command as uid/gid 1000 in its own user namespace with no
  capabilities, in a new session (no terminal to push keystrokes into), killed with its parent;
- a fresh root that is read-only: ``/usr`` and the top-level links or folders into it
  (``/bin``, ``/lib*``, ``/sbin``) bound read-only, a handful of ``/etc`` files the dynamic loader
  and the C library read (never ``/etc`` itself: no ``shadow``, no package-manager credentials),
  a ``passwd``/``group`` naming the sandbox user, a new ``/proc`` and a minimal ``/dev``;
- writable: the session's workspace at ``/workspace`` (the current folder and ``$HOME``) and a
  size-capped private ``/tmp`` and ``/dev/shm``;
- a cleared environment: ``PATH``, ``HOME``, ``LANG``, ``TMPDIR``, ``USER``, ``LOGNAME`` and the
  call's explicit ``env`` — nothing of the worker's own (no provider key);
- rlimits set inside the sandbox by ``prlimit`` (so they bind the command, not ``bwrap``, and no
  capability is left to raise them): address space, CPU time, processes, file size, open files,
  no core dumps.

At the ``process`` level the same ``prlimit`` line runs directly, in the workspace, with the same
cleared environment: limits and a timeout, but the host's files and network.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "ETC_FILES",
    "NETWORK_ETC_FILES",
    "SANDBOX_GID",
    "SANDBOX_HOME",
    "SANDBOX_UID",
    "SANDBOX_USER",
    "HostLayout",
    "RLimits",
    "bwrap_argv",
    "process_env",
    "rlimit_argv",
    "sandbox_env",
]

SANDBOX_UID = 1000
SANDBOX_GID = 1000
SANDBOX_USER = "sandbox"
SANDBOX_HOME = "/workspace"
PATH = "/usr/local/bin:/usr/bin:/bin"

ETC_FILES: tuple[str, ...] = (
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "alternatives",
    "localtime",
    "nsswitch.conf",
    "hosts",
    "host.conf",
    "protocols",
    "services",
    "mime.types",
)
"""What of ``/etc`` a sandbox sees (those that exist): what the loader, the C library and
Python's standard library read. Nothing secret, nothing naming the host's users."""
NETWORK_ETC_FILES: tuple[str, ...] = ("resolv.conf", "gai.conf", "ssl/certs")
"""Added when the config shares the network: name resolution and the CA certificates (not
``/etc/ssl`` itself, whose ``private`` folder holds keys)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RLimits:
    memory_bytes: int
    cpu_seconds: int
    processes: int
    file_bytes: int
    open_files: int


@dataclass(frozen=True, slots=True, kw_only=True)
class HostLayout:
    """What of the host a sandbox is built from (found once, see ``host.py``)."""

    links: tuple[tuple[str, str], ...]
    """Top-level symlinks to recreate, ``("/bin", "usr/bin")`` (a merged-``/usr`` system)."""
    read_only: tuple[str, ...]
    """Top-level folders bound read-only: ``/usr``, and ``/bin``, ``/lib``… where they are
    folders rather than links."""
    etc: tuple[str, ...]
    """Paths under ``/etc`` (of :data:`ETC_FILES` and, with network, :data:`NETWORK_ETC_FILES`)
    that exist on the host."""
    identity: Path
    """A folder holding the ``passwd`` and ``group`` files the sandbox sees (``etc/`` beside
    this module: root, the sandbox user, nobody)."""
    prlimit: str
    """``prlimit``'s absolute path, under a read-only folder the sandbox sees."""


def sandbox_env(extra: Mapping[str, str], *, home: str = SANDBOX_HOME) -> dict[str, str]:
    """The command's whole environment: a fixed minimum, then the call's explicit variables."""
    return {
        "PATH": PATH,
        "HOME": home,
        "LANG": "C.UTF-8",
        "TMPDIR": "/tmp",
        "USER": SANDBOX_USER,
        "LOGNAME": SANDBOX_USER,
        **extra,
    }


def process_env(extra: Mapping[str, str], *, home: Path) -> dict[str, str]:
    """The environment at the ``process`` level: the same minimum, the workspace as home."""
    return sandbox_env(extra, home=str(home))


def rlimit_argv(prlimit: str, limits: RLimits) -> list[str]:
    """``prlimit`` setting soft and hard limits, then ``--`` (the command follows). CPU time gets
    one second between soft (SIGXCPU, which says why) and hard (SIGKILL)."""
    return [
        prlimit,
        f"--as={limits.memory_bytes}",
        f"--cpu={limits.cpu_seconds}:{limits.cpu_seconds + 1}",
        f"--nproc={limits.processes}",
        f"--fsize={limits.file_bytes}",
        f"--nofile={limits.open_files}",
        "--core=0",
        "--",
    ]


def bwrap_argv(
    *,
    bwrap: str,
    layout: HostLayout,
    workspace: Path,
    cwd_parts: Sequence[str],
    network: bool,
    env: Mapping[str, str],
    limits: RLimits,
    tmp_bytes: int,
    command: Sequence[str],
    block_fd: int | None = None,
    info_fd: int | None = None,
) -> list[str]:
    """The ``bwrap`` command line running ``command`` in ``workspace`` (resolved, on the host) at
    ``/workspace/<cwd_parts>``. ``block_fd``/``info_fd``: bwrap writes the sandbox's pid to
    ``info_fd`` and waits on ``block_fd`` before running anything (the time to put it in a
    cgroup)."""
    argv = [bwrap, "--unshare-all"]
    if network:
        argv.append("--share-net")
    argv += ["--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_GID)]
    argv += ["--cap-drop", "ALL", "--die-with-parent", "--new-session", "--clearenv"]
    for name, value in env.items():
        argv += ["--setenv", name, value]
    for folder in layout.read_only:
        argv += ["--ro-bind", folder, folder]
    for link, target in layout.links:
        argv += ["--symlink", target, link]
    for name in layout.etc:
        argv += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
    for name in ("passwd", "group"):
        argv += ["--ro-bind", str(layout.identity / name), f"/etc/{name}"]
    argv += ["--proc", "/proc", "--dev", "/dev"]
    argv += ["--size", str(tmp_bytes), "--tmpfs", "/dev/shm", "--remount-ro", "/dev"]
    argv += ["--size", str(tmp_bytes), "--tmpfs", "/tmp"]
    argv += ["--bind", str(workspace), SANDBOX_HOME]
    argv += ["--chdir", "/".join((SANDBOX_HOME, *cwd_parts))]
    argv += ["--remount-ro", "/"]
    if block_fd is not None:
        argv += ["--block-fd", str(block_fd)]
    if info_fd is not None:
        argv += ["--info-fd", str(info_fd)]
    return [*argv, "--", *rlimit_argv(layout.prlimit, limits), *command]
