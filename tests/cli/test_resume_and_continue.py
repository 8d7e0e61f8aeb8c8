"""Durability the keyless path can show, and going on with a session: a scripted run killed with
SIGKILL mid-answer resumes with the same script; what it showed is not shown again; ``--continue``
takes the most recent session; ``--resume`` with nothing to resume, and a provider's error, say
so without passing for an answer; ``sessions list`` counts a fork's whole path."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import Mapping, Sequence
from pathlib import Path

from tackroom.testing.cli import run_tackroom, tackroom_argv

STARTUP = 60.0
ANSWER = "two and three make five, as the tool said"


def write(path: Path, turns: Sequence[Mapping[str, object]]) -> str:
    path.write_text(json.dumps(turns))
    return str(path)


async def test_a_killed_scripted_run_resumes_with_the_same_script(short_tmp: Path) -> None:
    script = write(
        short_tmp / "turns.json",
        [
            {"tool_calls": [{"function_id": "calc::add", "arguments": {"a": 2, "b": 3}}]},
            {"text": ANSWER, "deltas": "words", "delay_between_frames": 0.3},
        ],
    )
    model = ("--model", "scripted:demo", "--script", script)
    proc = await asyncio.create_subprocess_exec(
        *tackroom_argv("run", "2 + 3?", "--session", "k1", *model, "--json"),
        cwd=short_tmp,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    try:
        ran = False
        while True:  # the tool ran and the answer is streaming: kill the process there
            line = await asyncio.wait_for(proc.stdout.readline(), STARTUP)
            assert line, "the run ended before the answer streamed"
            event = json.loads(line)
            ran = ran or event["type"] == "function_execution_end"
            if ran and event["type"] == "message_update":
                break
    finally:
        proc.send_signal(signal.SIGKILL)
        await proc.wait()

    resumed = await run_tackroom("run", "--resume", "k1", *model, cwd=short_tmp, timeout=STARTUP)
    assert resumed.code == 0, resumed.stderr
    assert resumed.stdout == ANSWER + "\n"
    # One line: the tool call that ran before the kill is not shown again.
    [note] = resumed.stderr.splitlines()
    assert note.startswith("session k1: finishing the interrupted run run-")


async def test_continue_takes_the_session_used_last(short_tmp: Path) -> None:
    answers = [{"text": f"answer {n}"} for n in range(1, 4)]  # each session replays them
    model = ("--model", "scripted:demo", "--script", write(short_tmp / "turns.json", answers))
    nothing = await run_tackroom("run", "--continue", "hi", *model, cwd=short_tmp)
    assert nothing.code == 2
    assert nothing.stderr == (
        'tackroom: error: no session to continue: tackroom run "PROMPT" starts one\n'
    )

    for prompt, session in (("hello", "c1"), ("aside", "c2"), ("back", "c1")):
        ran = await run_tackroom("run", prompt, "--session", session, *model, cwd=short_tmp)
        assert ran.code == 0, ran.stderr
    # c2 is the newest session, c1 the one used last: --continue takes c1.
    more = await run_tackroom("run", "--continue", "more", *model, cwd=short_tmp)
    assert (more.code, more.stdout) == (0, "answer 3\n"), more.stderr  # c1's third answer
    shown = await run_tackroom("sessions", "show", "c1", cwd=short_tmp)
    assert [line.split("  ")[-1] for line in shown.stdout.splitlines()] == [
        "hello",
        "answer 1",
        "back",
        "answer 2",
        "more",
        "answer 3",
    ]

    answer_entry = shown.stdout.splitlines()[1].split()[0]
    forked = await run_tackroom("sessions", "fork", "c1", answer_entry, cwd=short_tmp)
    assert forked.code == 0, forked.stderr
    listed = await run_tackroom("sessions", "list", cwd=short_tmp)
    rows = {line.split()[0]: line.split(maxsplit=5)[3:] for line in listed.stdout.splitlines()}
    assert rows["c1"] == ["6", "entries", "hello"]  # its title: the first prompt
    assert rows[forked.stdout.strip()][:2] == ["2", "entries"]  # the fork's path: hello, answer


async def test_a_provider_error_is_not_an_answer(short_tmp: Path) -> None:
    script = write(
        short_tmp / "fails.json",
        [{"error": {"kind": "auth", "message": "the API key was rejected (401)"}}],
    )
    failed = await run_tackroom(
        "run", "hello", "--session", "e1", "--model", "scripted:demo", "--script", script,
        cwd=short_tmp,
    )  # fmt: skip
    assert failed.code == 1
    assert failed.stdout == ""  # stdout carries answers only
    assert "run ended: stopped (error): the API key was rejected (401)" in failed.stderr
    shown = await run_tackroom("sessions", "show", "e1", "--json", cwd=short_tmp)
    stored = json.loads(shown.stdout)["messages"][-1]["message"]
    assert (stored["stop_reason"], stored["content"]) == ("error", [])
    assert stored["error_message"] == "the API key was rejected (401)"
    lines = (await run_tackroom("sessions", "show", "e1", cwd=short_tmp)).stdout.splitlines()
    assert lines[-1].endswith("[assistant]  (error, auth) the API key was rejected (401)")
