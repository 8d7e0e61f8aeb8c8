"""Two ``tackroom run --model scripted:… --script …`` on one NATS bus, beside a third scripted
replica: model calls are spread over every process, and every run still gets its script in order."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path
from typing import Any

from tackroom.testing.cli import run_tackroom, tackroom_argv

STARTUP = 30.0
SCRIPT = """\
schema_version: 1
turns:
  - tool_calls: [{function_id: calc::add, arguments: {a: 1, b: 1}}]
  - tool_calls: [{function_id: calc::add, arguments: {a: 2, b: 2}}]
  - tool_calls: [{function_id: calc::add, arguments: {a: 3, b: 3}}]
  - tool_calls: [{function_id: calc::add, arguments: {a: 4, b: 4}}]
  - text: All added.
"""


def _events(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


async def test_two_runs_and_a_replica_share_the_script_cursors(
    tmp_path: Path, nats_url: str
) -> None:
    (tmp_path / "script.yaml").write_text(SCRIPT)
    (tmp_path / "tackroom.yaml").write_text(
        "schema_version: 1\nworker_config:\n  scripted:\n    script_path: script.yaml\n"
        "    per_session: true\n"
        # four calc::add turns in a row are the script, not a loop
        "  orchestrator:\n    loop_guard: {same_tool_limit: 8}\n"
    )
    replica = await asyncio.create_subprocess_exec(
        *tackroom_argv("worker", "run", "scripted", "--engine", nats_url),
        cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert replica.stdout is not None
        ready = (await asyncio.wait_for(replica.stdout.readline(), STARTUP)).decode()
        assert ready.startswith("tackroom ready"), ready
        args = ("run", "add", "--model", "scripted:demo", "--script", "script.yaml", "--json")
        runs = await asyncio.gather(
            *(run_tackroom(*args, "--engine", nats_url, cwd=tmp_path, timeout=90) for _ in range(2))
        )
    finally:
        replica.send_signal(signal.SIGTERM)
        await asyncio.wait_for(replica.wait(), STARTUP)
    for run in runs:
        assert run.code == 0, run.stderr
        events = _events(run.stdout)
        (end,) = [e for e in events if e.get("type") == "agent_end"]
        assert "loop_detected" not in json.dumps(end), end
        calls = [e["data"] for e in events if e.get("type") == "function_execution_start"]
        seen = [e.get("type") for e in events if e.get("type") != "message_update"]
        assert [c["arguments"] for c in calls] == [{"a": n, "b": n} for n in range(1, 5)], (
            seen,
            run.stderr[-2000:],
        )
        assert "All added." in run.stdout
