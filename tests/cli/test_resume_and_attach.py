"""A killed run is finished by rerunning its session; a second command reaches a running serve."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import sys
from pathlib import Path

from tackroom.testing.cli import run_tackroom

STARTUP = 30.0

CONFIG = """schema_version: 1
engine: embedded:state/engine.db
endpoint:
  socket: run/tr.sock
"""


def write_script(path: Path, turns: list[dict[str, object]]) -> Path:
    path.write_text(json.dumps(turns))
    return path


async def test_rerunning_a_killed_session_finishes_its_run_first(short_tmp: Path) -> None:
    (short_tmp / "tackroom.yaml").write_text(CONFIG)
    stalls = write_script(short_tmp / "stall.json", [{"text": "never said", "delay": 60}])
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tackroom.cli.main", "run", "first question", "--session", "s1",
        "--model", "scripted:demo", "--script", str(stalls), "--json", cwd=short_tmp,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None
    try:
        while True:  # wait until the model call is under way, then kill the process
            line = await asyncio.wait_for(proc.stdout.readline(), STARTUP)
            assert line, "the run ended before it reached the model"
            event = json.loads(line)
            streaming = {"type": "turn_state_changed", "to": "assistant_streaming"}
            if {"type": event["type"], "to": event["data"].get("to")} == streaming:
                break
    finally:
        proc.send_signal(signal.SIGKILL)
        await proc.wait()

    answers = write_script(
        short_tmp / "answers.json", [{"text": "first answer"}, {"text": "second answer"}]
    )
    busy = await run_tackroom(
        "run", "second question", "--session", "s1", "--model", "scripted:demo",
        "--script", str(answers), cwd=short_tmp,
    )  # fmt: skip
    assert busy.code == 0, busy.stderr
    assert "finishing the interrupted run" in busy.stderr
    assert busy.stdout.splitlines() == ["first answer", "second answer"]

    again = await run_tackroom(
        "run", "--resume", "s1", "--model", "scripted:demo", "--script", str(answers),
        cwd=short_tmp,
    )  # fmt: skip
    assert again.code == 2, again.stderr
    assert again.stderr.strip().splitlines() == [
        "tackroom: error: session s1 has no interrupted run to resume"
        ' (continue it with: tackroom run --session s1 "PROMPT")'
    ]


async def test_a_run_in_a_served_directory_attaches_to_the_serve(short_tmp: Path) -> None:
    script = [
        {"text": "served answer"},
        {"text": "second served answer"},
        {"text": "streamed word by word", "deltas": "words", "delay_between_frames": 0.01},
    ]
    (short_tmp / "tackroom.yaml").write_text(
        CONFIG
        + "agent:\n  model: scripted:demo\nworker_config:\n  scripted:\n"
        + f"    script: {json.dumps(script)}\n"
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tackroom.cli.main", "serve", cwd=short_tmp,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None
    try:
        ready = (await asyncio.wait_for(proc.stdout.readline(), STARTUP)).decode()
        workers = re.search(r"workers=(\S+)", ready)
        assert workers, ready
        assert {"orchestrator", "sessions", "scripted"} <= set(workers[1].split(","))

        first = await run_tackroom("run", "hello", "--session", "s1", cwd=short_tmp)
        assert first.code == 0, first.stderr
        assert first.stdout == "served answer\n"

        forced = await run_tackroom("run", "again", "--session", "s1", "--attach", cwd=short_tmp)
        assert forced.code == 0, forced.stderr
        assert forced.stdout == "second served answer\n"

        streamed = await run_tackroom("run", "more", "--session", "s1", "--json", cwd=short_tmp)
        assert streamed.code == 0, streamed.stderr
        events = [json.loads(line) for line in streamed.stdout.splitlines()]
        deltas = [e["data"]["delta"] for e in events if e["type"] == "message_update"]
        assert "".join(deltas) == "streamed word by word"  # live frames cross the endpoint

        state = await run_tackroom("call", "turn::get_state", '{"session_id": "s1"}', cwd=short_tmp)
        assert state.code == 0, state.stderr
        assert json.loads(state.stdout)["state"] == "stopped"
    finally:
        proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(proc.wait(), STARTUP)


async def test_a_run_that_fails_says_why(short_tmp: Path) -> None:
    script = write_script(
        short_tmp / "fails.json",
        [{"error": {"kind": "auth", "message": "the API key was rejected (401)"}}],
    )
    result = await run_tackroom(
        "run", "hello", "--model", "scripted:demo", "--script", str(script), cwd=short_tmp
    )
    assert result.code == 1
    assert "run ended: stopped (error): the API key was rejected (401)" in result.stderr
