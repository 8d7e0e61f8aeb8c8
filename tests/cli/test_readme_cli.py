"""The README's command lines run as written, as real processes without a terminal: a run that
needs approval never hangs (it exits 3 with the lines that decide it, and those lines work), or
waits ``--approval-timeout`` for a decision from elsewhere; the task graph example runs."""

from __future__ import annotations

import asyncio
import re
import shlex
from pathlib import Path

from tackroom.testing.cli import run_tackroom, tackroom_argv

ROOT = Path(__file__).resolve().parents[2]
STARTUP = 60.0


def readme_lines(section: str) -> list[list[str]]:
    """The ``tackroom`` command lines of the README's first shell block under ``section``,
    continuations joined, comments and the ``.venv/bin/`` prefix dropped, repository paths
    made absolute."""
    text = (ROOT / "README.md").read_text()
    block = text.split(f"## {section}\n", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    commands = []
    for line in block.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        if words and words[0].endswith("tackroom"):
            paths = [str(ROOT / w) if (ROOT / w).is_file() else w for w in words[1:]]
            commands.append(paths)
    return commands


def readme_line(section: str, *start: str) -> list[str]:
    found = [c for c in readme_lines(section) if c[: len(start)] == list(start)]
    assert found, f"no `tackroom {' '.join(start)}` line in the README's {section!r} block"
    return found[0]


FIRST_RUN = ("run", "What is 1234 + 5678? Save the result to result.txt.")


async def test_the_first_run_never_hangs_and_its_lines_finish_it(short_tmp: Path) -> None:
    line = readme_line("Running an agent from the command line", *FIRST_RUN)
    parked = await run_tackroom(*line, cwd=short_tmp, timeout=STARTUP)  # stdin: not a terminal
    assert parked.code == 3, parked.stderr
    assert parked.stdout == ""
    said = [text.strip() for text in parked.stderr.splitlines()]
    assert '→ calc::add {"a": 1234, "b": 5678}' in said  # the call before it ran
    approve = next(text for text in said if text.startswith("tackroom approve "))
    session, call = approve.split()[2:]
    assert call == "write-1"
    assert f'tackroom deny {session} write-1 --reason "…"' in said
    resume = said[-1]
    assert resume.startswith(f"tackroom run --resume {session} --model scripted:demo --script ")

    approved = await run_tackroom(*shlex.split(approve)[1:], cwd=short_tmp)
    assert approved.code == 0, approved.stderr
    finished = await run_tackroom(*shlex.split(resume)[1:], cwd=short_tmp, timeout=STARTUP)
    assert finished.code == 0, finished.stderr
    assert finished.stdout.startswith("1234 + 5678 = 6912.")
    assert "calc::add" not in finished.stderr  # it ran before: not shown again
    assert "→ fs::write" in finished.stderr
    written = short_tmp / ".tackroom" / "workspaces" / session / "result.txt"
    assert written.read_text() == "6912\n"


async def test_approval_timeout_waits_for_a_decision_from_elsewhere(short_tmp: Path) -> None:
    line = readme_line("Running an agent from the command line", *FIRST_RUN)
    proc = await asyncio.create_subprocess_exec(
        *tackroom_argv(*line, "--approval-timeout", "600"),
        cwd=short_tmp,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stderr is not None
    try:
        waiting = ""
        while "waiting up to 600s" not in waiting:
            waiting = (await asyncio.wait_for(proc.stderr.readline(), STARTUP)).decode()
            assert waiting, "the run ended before it waited for approval"
        command = re.search(r"`(tackroom approve \S+ write-1)`", waiting)
        assert command, waiting
        approved = await run_tackroom(*command[1].split()[1:], cwd=short_tmp)
        assert approved.code == 0, approved.stderr
        out, _ = await asyncio.wait_for(proc.communicate(), STARTUP)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0
    assert out.decode().startswith("1234 + 5678 = 6912.")


async def test_the_task_graph_example_runs_as_written(short_tmp: Path) -> None:
    line = readme_line("Running an agent from the command line", "tasks", "run")
    result = await run_tackroom(*line, cwd=short_tmp, timeout=STARTUP)
    assert result.code == 0, result.stderr
    assert "succeeded" in result.stdout
