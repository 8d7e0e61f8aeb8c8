"""``tackroom serve`` and ``tackroom call`` as real processes, as a user runs them."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import stat
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tackroom.testing.cli import CliResult, run_tackroom

STARTUP = 30.0


@dataclass
class Served:
    proc: asyncio.subprocess.Process
    socket: Path
    cwd: Path


@pytest.fixture
async def served(short_tmp: Path) -> AsyncIterator[Served]:
    (short_tmp / "tackroom.yaml").write_text(
        "schema_version: 1\nengine: embedded:state/engine.db\nworkers: [engine]\n"
        "endpoint:\n  socket: run/tr.sock\n"
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tackroom.cli.main",
        "serve",
        cwd=short_tmp,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    try:
        line = (await asyncio.wait_for(proc.stdout.readline(), STARTUP)).decode()
        match = re.fullmatch(r"tackroom ready socket=(\S+) workers=engine\n", line)
        assert match, f"unexpected ready line {line!r}"
        yield Served(proc, Path(match[1]), short_tmp)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def stop(served: Served) -> CliResult:
    served.proc.send_signal(signal.SIGTERM)
    out, err = await asyncio.wait_for(served.proc.communicate(), STARTUP)
    assert served.proc.returncode is not None
    return CliResult(served.proc.returncode, out.decode(), err.decode())


async def test_serve_then_call_then_shutdown(served: Served) -> None:
    assert served.socket == served.cwd.resolve() / "run" / "tr.sock"
    assert stat.S_IMODE(served.socket.stat().st_mode) == 0o600
    assert stat.S_IMODE(served.socket.parent.stat().st_mode) == 0o700

    payload = json.dumps({"scope": "s", "key": "k", "value": {"hello": "world"}})
    set_result = await run_tackroom("call", "state::set", payload, cwd=served.cwd)
    assert set_result.code == 0, set_result.stderr
    revision = json.loads(set_result.stdout)["revision"]

    get_result = await run_tackroom(
        "call", "state::get", "-", "--socket", str(served.socket), cwd=Path("/"),
        stdin=b'{"scope": "s", "key": "k"}',
    )  # fmt: skip
    assert get_result.code == 0, get_result.stderr
    assert json.loads(get_result.stdout) == {"value": {"hello": "world"}, "revision": revision}

    listed = await run_tackroom("functions", cwd=served.cwd)
    assert listed.code == 0, listed.stderr
    assert re.search(r"^state::get\s+engine\s+Read a state value", listed.stdout, re.MULTILINE)

    stopped = await stop(served)
    assert stopped.code == 0, stopped.stderr
    assert not served.socket.exists()
    assert (served.cwd / "state" / "engine.db").exists()


async def test_typed_errors_reach_the_caller(served: Served) -> None:
    missing = await run_tackroom(
        "call", "state::gett", '{"scope": "s", "key": "k"}', cwd=served.cwd
    )
    assert missing.code == 1
    assert missing.stdout == ""
    assert "no worker serves function 'state::gett'; did you mean state::get" in missing.stderr

    invalid = await run_tackroom("call", "state::get", '{"scope": "s"}', cwd=served.cwd)
    assert invalid.code == 1
    assert "[invalid_request] key: Field required" in invalid.stderr

    not_json = await run_tackroom("call", "state::get", "{scope", cwd=served.cwd)
    assert not_json.code == 2
    assert "the payload: invalid JSON" in not_json.stderr

    assert (await stop(served)).code == 0


async def test_a_second_serve_on_the_same_socket_is_refused(served: Served) -> None:
    second = served.cwd / "second"
    second.mkdir()
    (second / "tackroom.yaml").write_text(
        f"schema_version: 1\nengine: 'embedded::memory:'\nendpoint: {{socket: {served.socket}}}\n"
    )
    refused = await run_tackroom("serve", cwd=second)
    assert refused.code == 1
    assert "another tackroom process is listening" in refused.stderr
    assert served.socket.exists()
    assert (await stop(served)).code == 0


async def test_call_without_a_running_serve(short_tmp: Path) -> None:
    result = await run_tackroom(
        "call", "state::get", "--socket", str(short_tmp / "none.sock"), cwd=short_tmp
    )
    assert result.code == 1
    assert "no tackroom serve is listening" in result.stderr


async def test_serve_survives_a_stale_socket_from_a_killed_process(served: Served) -> None:
    served.proc.kill()  # SIGKILL: no cleanup, the socket file stays
    await served.proc.wait()
    assert served.socket.exists()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tackroom.cli.main", "serve", cwd=served.cwd,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    restarted = Served(proc, served.socket, served.cwd)
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), STARTUP)
        assert line.startswith(b"tackroom ready")
        result = await run_tackroom("call", "state::list", '{"scope": "s"}', cwd=served.cwd)
        assert (result.code, json.loads(result.stdout)) == (0, {"items": []})
        assert (await stop(restarted)).code == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert not served.socket.exists()


async def test_worker_run_hosts_one_worker(short_tmp: Path) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tackroom.cli.main", "worker", "run", "engine",
        "--engine", "embedded::memory:", cwd=short_tmp,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), STARTUP)
        assert line == b"tackroom ready workers=engine\n"
        proc.send_signal(signal.SIGINT)
        await asyncio.wait_for(proc.wait(), STARTUP)
        assert proc.returncode == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert not (short_tmp / ".tackroom").exists()
