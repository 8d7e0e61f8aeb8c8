"""Structured output survives SIGKILL between the wrong answer and the corrective model call.

A child harness (``structured_crash_child.py``) starts a run with an output schema; the model's
first answer does not validate. The orchestrator commits it with a corrective message, and the
child is killed while the corrective call is in flight. A second child on the same engine URL
only boots: the run resumes at the corrective call, which is made exactly once (the wrong answer
is not asked for again), and the run ends with a valid answer, its usage counting both calls —
on every backend of ``tackroom.testing.backends``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tackroom.engine import open_engine
from tackroom.runtime import Host, load_worker
from tackroom.testing import running_engine
from tackroom.testing.backends import BACKENDS, engine_url_for

from ..crashkit import run_killable
from .harness import messages_of, roles, text, turn_of
from .structured_crash_child import RIGHT, RUN_ID, SESSION, WRONG

CHILD_TIMEOUT = 20.0


async def _child(
    url: str, workdir: Path, phase: str, *, kill_at_hold: bool
) -> list[dict[str, Any]]:
    markers: list[dict[str, Any]] = []
    await run_killable(
        "tests.turn.structured_crash_child",
        [url, str(workdir), f"--phase={phase}"],
        workdir=workdir,
        phase=phase,
        on_line=markers.append,
        kill_when=(lambda: any(m["marker"] == "hold" for m in markers)) if kill_at_hold else None,
        timeout=CHILD_TIMEOUT,
    )
    return markers


@pytest.mark.parametrize("backend", list(BACKENDS))
async def test_the_corrective_call_is_made_once_after_a_crash(backend: str, tmp_path: Path) -> None:
    url = engine_url_for(backend, tmp_path)
    first = await _child(url, tmp_path, "first", kill_at_hold=True)
    assert [m["marker"] for m in first] == ["started", "hold"]
    async with running_engine(url) as engine:
        at_kill = await turn_of(engine, SESSION)
    # Killed between the two: the wrong answer and the correction committed, the call not made.
    assert at_kill is not None
    assert (at_kill.state, at_kill.turn_count, at_kill.output_retries) == (
        "assistant_streaming",
        1,
        1,
    )
    assert at_kill.usage.output_tokens == 11

    resumed = await _child(url, tmp_path, "resume", kill_at_hold=False)
    (finished,) = [m for m in resumed if m["marker"] == "finished"]
    assert (finished["state"], finished["stop_reason"]) == ("stopped", "end")
    provider = finished["provider"]
    assert provider["calls"] == 1, provider  # the corrective call, once; the wrong answer kept
    assert provider["violations"] == [], provider  # it read the wrong answer and the correction

    host = Host(engine=open_engine(url), workers=[load_worker("engine"), load_worker("sessions")])
    async with host:
        record = await turn_of(host.engine, SESSION)
        entries = await messages_of(host.engine, SESSION)
    assert record is not None
    assert (record.state, record.stop_reason, record.output_retries) == ("stopped", "end", 1)
    assert (record.usage.input_tokens, record.usage.output_tokens) == (120, 20)
    assert roles(entries) == [
        (f"{RUN_ID}-m0", "user"),
        (f"{RUN_ID}-t1-a", "assistant"),
        (f"{RUN_ID}-t1-fix", "user"),
        (f"{RUN_ID}-t2-a", "assistant"),
    ]
    assert text(entries[1]["message"]) == WRONG
    assert "population" in text(entries[2]["message"])
    assert json.loads(text(entries[3]["message"])) == json.loads(RIGHT)
