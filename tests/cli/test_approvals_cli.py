"""``tackroom approve|deny`` and ``tackroom approvals`` as real processes, against a running
``tackroom serve`` and against the engine's file when nothing serves it; and the inline prompt
of ``tackroom run`` (its decision path, in process)."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tackroom.contracts import approvals as c
from tackroom.runtime import LocalClient
from tackroom.testing.cli import run_tackroom

STARTUP = 30.0

CONFIG = (
    "schema_version: 1\nengine: embedded:state/engine.db\nworkers: [{workers}]\n"
    "endpoint:\n  socket: run/tr.sock\n"
)


@dataclass
class Served:
    proc: asyncio.subprocess.Process
    socket: Path
    cwd: Path


async def serve(cwd: Path, workers: str = "engine, approvals") -> Served:
    (cwd / "tackroom.yaml").write_text(CONFIG.format(workers=workers))
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tackroom.cli.main",
        "serve",
        cwd=cwd,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    try:
        line = (await asyncio.wait_for(proc.stdout.readline(), STARTUP)).decode()
    except BaseException:
        proc.kill()
        await proc.wait()
        raise
    match = re.fullmatch(r"tackroom ready socket=(\S+) workers=(\S+)\n", line)
    if match is None:
        proc.kill()
        await proc.wait()
        raise AssertionError(f"unexpected ready line {line!r}")
    return Served(proc, Path(match[1]), cwd)


async def stop(served: Served) -> None:
    if served.proc.returncode is None:
        served.proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(served.proc.communicate(), STARTUP)
    assert served.proc.returncode == 0


@pytest.fixture
async def served(short_tmp: Path) -> AsyncIterator[Served]:
    running = await serve(short_tmp)
    try:
        yield running
    finally:
        if running.proc.returncode is None:
            running.proc.kill()
            await running.proc.wait()


async def ask(socket: Path, cid: str, function_id: str = "fs::write") -> dict[str, Any]:
    """What the orchestrator does when policy says needs_approval (from yet another client)."""
    async with LocalClient(socket) as client:
        reply: dict[str, Any] = await client.trigger(
            c.REQUEST.id,
            {
                "session_id": "s1",
                "function_call_id": cid,
                "function_id": function_id,
                "arguments": {"path": "notes.txt"},
                "reason": "writes need approval",
                "run_id": "run-1",
            },
        )
    return reply


async def test_approve_and_deny_from_other_processes(served: Served) -> None:
    assert (await ask(served.socket, "c1"))["status"] == "pending"
    assert (await ask(served.socket, "c2", "shell::run"))["status"] == "pending"

    listed = await run_tackroom("approvals", "list", cwd=served.cwd)
    assert listed.code == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert re.match(r"s1  c1  fs::write \{\"path\": \"notes.txt\"\}  \(expires in \d+m\)", lines[0])
    assert lines[1].strip() == "writes need approval"
    assert lines[2].startswith("s1  c2  shell::run")

    approved = await run_tackroom(
        "approve", "s1", "c1", "--reason", "looks fine", "--approver", "alice", cwd=served.cwd
    )
    assert approved.code == 0, approved.stderr
    assert approved.stdout.strip() == "allowed fs::write (call c1 of session s1) by alice"

    again = await run_tackroom("deny", "s1", "c1", "--approver", "bob", cwd=served.cwd)
    assert again.code == 1
    assert "[already_decided]" in again.stderr
    assert "allow (looks fine) by alice" in again.stderr

    unknown = await run_tackroom("approve", "s1", "nope", cwd=served.cwd)
    assert unknown.code == 1
    assert "[not_pending]" in unknown.stderr

    denied = await run_tackroom("deny", "s1", "c2", "--json", "--approver", "bob", cwd=served.cwd)
    assert denied.code == 0, denied.stderr
    record = json.loads(denied.stdout)
    assert (record["decision"], record["approver"]) == ("deny", "bob")

    remaining = await run_tackroom("approvals", "list", "--json", cwd=served.cwd)
    assert json.loads(remaining.stdout)["pending"] == []
    empty = await run_tackroom("approvals", "list", cwd=served.cwd)
    assert empty.stdout.strip() == "no calls are waiting for approval"

    # the serve's state holds both decisions, with their approvers: the audit trail
    async with LocalClient(served.socket) as client:
        got = await client.trigger(c.GET.id, {"session_id": "s1", "function_call_id": "c1"})
    assert got["pending"] is None
    assert (got["decision"]["approver"], got["decision"]["reason"]) == ("alice", "looks fine")
    await stop(served)


async def test_always_and_modes_from_the_command_line(served: Served) -> None:
    await ask(served.socket, "c1")
    always = await run_tackroom(
        "approve", "s1", "c1", "--always", "--approver", "a", cwd=served.cwd
    )
    assert always.code == 0, always.stderr
    assert "fs::write is allowed for the rest of the session" in always.stdout
    assert (await ask(served.socket, "c2"))["status"] == "allowed"

    mode = await run_tackroom(
        "approvals", "mode", "s1", "auto", "--allow", "shell::*", cwd=served.cwd
    )
    assert mode.code == 0, mode.stderr
    assert mode.stdout.strip() == "session s1: mode auto, always allow shell::*"
    assert (await ask(served.socket, "c3", "shell::run"))["status"] == "allowed"
    assert (await ask(served.socket, "c4", "net::fetch"))["status"] == "pending"
    await stop(served)


async def test_approvals_survive_every_process_restarting(served: Served) -> None:
    await ask(served.socket, "c1")
    await ask(served.socket, "c2")
    await stop(served)

    # nothing serves the engine: the command runs the worker on the engine's file itself
    listed = await run_tackroom("approvals", "list", "--session", "s1", cwd=served.cwd)
    assert listed.code == 0, listed.stderr
    assert [line.split()[1] for line in listed.stdout.splitlines() if line.startswith("s1")] == [
        "c1",
        "c2",
    ]
    denied = await run_tackroom("deny", "s1", "c1", "--approver", "carol", cwd=served.cwd)
    assert denied.code == 0, denied.stderr

    again = await serve(served.cwd)
    try:
        async with LocalClient(again.socket) as client:
            got = await client.trigger(c.GET.id, {"session_id": "s1", "function_call_id": "c1"})
            pending = await client.trigger(c.LIST_PENDING.id, {})
        assert (got["decision"]["decision"], got["decision"]["approver"]) == ("deny", "carol")
        assert [p["function_call_id"] for p in pending["pending"]] == ["c2"]
        approved = await run_tackroom("approve", "s1", "c2", "--approver", "dan", cwd=again.cwd)
        assert approved.code == 0, approved.stderr
    finally:
        await stop(again)


async def test_a_serve_without_the_approvals_worker(short_tmp: Path) -> None:
    running = await serve(short_tmp, workers="engine")
    try:
        result = await run_tackroom("approve", "s1", "c1", cwd=short_tmp)
        assert result.code == 1
        assert "no worker serves function 'approval::get'" not in result.stderr
        assert "approval::resolve" in result.stderr
        assert "is `approvals` in the harness's boot list?" in result.stderr
    finally:
        await stop(running)


# -- tackroom run's inline prompt: where its answer goes -----------------------------------------
