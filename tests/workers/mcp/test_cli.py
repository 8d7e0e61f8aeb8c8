"""``tackroom serve`` with the bridge, then ``tackroom functions`` and ``tackroom call`` — real
processes, mcp-server-time (PyPI) over stdio."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tackroom.testing.cli import run_tackroom

STARTUP = 30.0

CONFIG = f"""\
schema_version: 1
engine: embedded:state/engine.db
workers: [engine, mcp]
endpoint:
  socket: run/tr.sock
worker_config:
  mcp:
    servers:
      time:
        command: [{json.dumps(sys.executable)}, -m, mcp_server_time]
      gone:
        command: [./no-such-server]
"""


@pytest.fixture
async def served() -> AsyncIterator[tuple[Path, asyncio.subprocess.Process]]:
    """A ``tackroom serve`` (in a short temporary folder: a socket path must be short) and its
    stderr up to the ready line."""
    with tempfile.TemporaryDirectory(prefix="tr-") as directory:
        cwd = Path(directory)
        (cwd / "tackroom.yaml").write_text(CONFIG)
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tackroom.cli.main", "serve",
            cwd=cwd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        assert proc.stdout is not None
        try:
            line = (await asyncio.wait_for(proc.stdout.readline(), STARTUP)).decode()
            assert re.fullmatch(r"tackroom ready socket=\S+ workers=engine,mcp\n", line), line
            yield cwd, proc
        finally:
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
                await asyncio.wait_for(proc.wait(), STARTUP)


async def test_functions_lists_the_bridge_and_call_reaches_a_server(
    served: tuple[Path, asyncio.subprocess.Process],
) -> None:
    cwd, proc = served
    listed = await run_tackroom("functions", cwd=cwd)
    assert listed.code == 0, listed.stderr
    assert re.search(
        r"^mcp::time::get_current_time\s+mcp\s+Get current time", listed.stdout, re.MULTILINE
    )
    for function_id in ("mcp::servers", "mcp::resources::read", "mcp::prompts::get"):
        assert re.search(rf"^{function_id}\s+mcp\s", listed.stdout, re.MULTILINE)

    called = await run_tackroom(
        "call", "mcp::time::get_current_time", '{"timezone": "Europe/Berlin"}', cwd=cwd
    )
    assert called.code == 0, called.stderr
    reply = json.loads(called.stdout)
    assert reply["details"]["structured"]["timezone"] == "Europe/Berlin"
    assert reply["is_error"] is False

    status = json.loads((await run_tackroom("call", "mcp::servers", "{}", cwd=cwd)).stdout)
    states = {server["name"]: server["state"] for server in status["servers"]}
    assert states["time"] == "connected"
    assert states["gone"] in ("connecting", "reconnecting")

    proc.send_signal(signal.SIGTERM)
    _, err = await asyncio.wait_for(proc.communicate(), STARTUP)
    # the server that cannot start is one readable warning line, not a traceback
    text = err.decode()
    assert "mcp: server 'gone' (./no-such-server) did not start: cannot start" in text
    assert "Traceback" not in text
