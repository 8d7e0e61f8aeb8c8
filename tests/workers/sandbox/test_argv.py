"""The sandbox's command lines, host layout and cgroup discovery, as pure functions."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tackroom.workers.sandbox.argv import (
    ETC_FILES,
    HostLayout,
    RLimits,
    bwrap_argv,
    rlimit_argv,
    sandbox_env,
)
from tackroom.workers.sandbox.cgroups import _locate
from tackroom.workers.sandbox.host import IDENTITY, find_layout
from tackroom.workers.sandbox.sandbox import outcome_of

LIMITS = RLimits(
    memory_bytes=256 << 20, cpu_seconds=5, processes=32, file_bytes=1 << 20, open_files=64
)
LAYOUT = HostLayout(
    links=(("/bin", "usr/bin"), ("/lib", "usr/lib")),
    read_only=("/usr",),
    etc=("ld.so.cache", "alternatives"),
    identity=Path("/pkg/etc"),
    prlimit="/usr/bin/prlimit",
)


def build(**overrides: object) -> list[str]:
    options: dict[str, object] = {
        "bwrap": "/usr/bin/bwrap",
        "layout": LAYOUT,
        "workspace": Path("/srv/ws/s1"),
        "cwd_parts": ("src", "pkg"),
        "network": False,
        "env": sandbox_env({"FOO": "bar"}),
        "limits": LIMITS,
        "tmp_bytes": 1 << 20,
        "command": ["/bin/sh", "-c", "echo hi"],
    }
    options.update(overrides)
    return bwrap_argv(**options)  # type: ignore[arg-type]


def pairs(argv: list[str], flag: str) -> list[tuple[str, str]]:
    """The (source, destination) of every ``flag SRC DEST`` in ``argv``."""
    return [(argv[i + 1], argv[i + 2]) for i, item in enumerate(argv) if item == flag]


def options(argv: list[str]) -> list[str]:
    return argv[: argv.index("--")]


def test_every_namespace_is_unshared_and_nothing_is_kept() -> None:
    argv = options(build())
    assert argv[0] == "/usr/bin/bwrap"
    for flag in ("--unshare-all", "--unshare-user", "--die-with-parent", "--new-session"):
        assert flag in argv
    assert "--share-net" not in argv
    assert argv[argv.index("--cap-drop") + 1] == "ALL"
    assert (argv[argv.index("--uid") + 1], argv[argv.index("--gid") + 1]) == ("1000", "1000")
    assert "--clearenv" in argv
    assert argv.index("--clearenv") < argv.index("--setenv")


def test_network_is_shared_only_when_configured() -> None:
    assert "--share-net" in options(build(network=True))


def test_only_the_workspace_is_writable() -> None:
    argv = options(build())
    assert pairs(argv, "--bind") == [("/srv/ws/s1", "/workspace")]
    read_only = pairs(argv, "--ro-bind")
    sources = [source for source, _ in read_only]
    assert ("/usr", "/usr") in read_only
    assert ("/etc/ld.so.cache", "/etc/ld.so.cache") in read_only
    assert ("/pkg/etc/passwd", "/etc/passwd") in read_only
    for secret in ("/etc", "/etc/shadow", "/root", "/home", "/", "/proc", "/sys", "/run"):
        assert secret not in sources
    assert pairs(argv, "--symlink") == [("usr/bin", "/bin"), ("usr/lib", "/lib")]
    # the root itself is remounted read-only after every mount is made
    assert argv[-2:] == ["--remount-ro", "/"]
    tmpfs = [argv[i + 1] for i, item in enumerate(argv) if item == "--tmpfs"]
    assert tmpfs == ["/dev/shm", "/tmp"]
    sizes = [argv[i + 1] for i, item in enumerate(argv) if item == "--size"]
    assert sizes == [str(1 << 20)] * 2


def test_the_command_runs_in_its_folder_under_prlimit() -> None:
    argv = build()
    assert argv[argv.index("--chdir") + 1] == "/workspace/src/pkg"
    assert build(cwd_parts=())[build(cwd_parts=()).index("--chdir") + 1] == "/workspace"
    tail = argv[argv.index("--") + 1 :]
    assert tail == [*rlimit_argv("/usr/bin/prlimit", LIMITS), "/bin/sh", "-c", "echo hi"]


def test_limits() -> None:
    assert rlimit_argv("/usr/bin/prlimit", LIMITS) == [
        "/usr/bin/prlimit",
        f"--as={256 << 20}",
        "--cpu=5:6",
        "--nproc=32",
        f"--fsize={1 << 20}",
        "--nofile=64",
        "--core=0",
        "--",
    ]


def test_the_environment_is_a_fixed_minimum_plus_the_calls() -> None:
    argv = options(build())
    env = {argv[i + 1]: argv[i + 2] for i, item in enumerate(argv) if item == "--setenv"}
    assert env == {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": "/workspace",
        "LANG": "C.UTF-8",
        "TMPDIR": "/tmp",
        "USER": "sandbox",
        "LOGNAME": "sandbox",
        "FOO": "bar",
    }


def test_the_cgroup_handshake_fds() -> None:
    argv = options(build(block_fd=7, info_fd=9))
    assert argv[argv.index("--block-fd") + 1] == "7"
    assert argv[argv.index("--info-fd") + 1] == "9"
    assert "--block-fd" not in options(build())


def test_layout_follows_the_host(tmp_path: Path) -> None:
    (tmp_path / "usr" / "bin").mkdir(parents=True)
    (tmp_path / "bin").symlink_to("usr/bin")
    (tmp_path / "lib64").mkdir()  # a folder, not a link: bound as it is
    (tmp_path / "etc" / "ssl" / "certs").mkdir(parents=True)
    for name in ("ld.so.cache", "shadow", "hosts", "resolv.conf"):
        (tmp_path / "etc" / name).write_text("x")
    layout = find_layout(network=False, prlimit="/usr/bin/prlimit", root=tmp_path)
    assert layout.links == (("/bin", "usr/bin"),)
    assert layout.read_only == ("/usr", "/lib64")
    assert layout.etc == ("ld.so.cache", "hosts")
    with_network = find_layout(network=True, prlimit="/usr/bin/prlimit", root=tmp_path)
    assert with_network.etc == ("ld.so.cache", "hosts", "resolv.conf", "ssl/certs")
    assert "shadow" not in ETC_FILES


def test_the_sandbox_identity_files_ship_with_the_worker() -> None:
    passwd = (IDENTITY / "passwd").read_text()
    assert "sandbox:x:1000:1000:sandbox:/workspace:/bin/sh" in passwd
    assert "sandbox:x:1000:" in (IDENTITY / "group").read_text()


@pytest.mark.parametrize(
    ("returncode", "expected"),
    [
        (0, (0, None)),
        (3, (3, None)),
        (-signal.SIGKILL, (137, 9)),
        (128 + signal.SIGXCPU, (152, signal.SIGXCPU)),
        (255, (255, None)),
    ],
)
def test_exit_codes(returncode: int, expected: tuple[int, int | None]) -> None:
    assert outcome_of(returncode) == expected


V1 = """\
30 25 0:26 / /sys/fs/cgroup rw,nosuid - tmpfs tmpfs rw,mode=755
41 30 0:37 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
42 30 0:38 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
43 30 0:39 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""
V2 = "30 25 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"


def test_cgroup_hierarchies_are_found() -> None:
    own_v1 = "8:pids:/jobs/a\n4:memory:/x\n0::/\n"
    assert _locate(V1, own_v1) == (Path("/sys/fs/cgroup/pids/jobs/a"), 1)
    assert _locate(V2, "0::/user.slice/me\n") == (Path("/sys/fs/cgroup/user.slice/me"), 2)
    assert _locate(V1.splitlines()[0], own_v1) is None
