"""Subagents survive SIGKILL at nine points across the parent and its children.

For each kill point (``CASES`` in ``crash_agents.py``) a real child process starts the scenario
— the lead calls ``agent::alpha`` and ``agent::beta`` in one message, then ``agent::gamma``, then
answers with all three — and is killed with SIGKILL once it is held there. A second process on
the same engine URL only boots; the orchestrator wakes the lead and every child left unfinished,
and the lead must finish with the same answer as an uninterrupted run. Then, in this process:

- each child run was started once: one new ``run::start`` per child across both processes,
  exactly three child sessions, each holding one run's entries (its note, task and answer) and a
  turn record that ended normally under the run id derived from the parent's call;
- the parent woke once per batch: its session holds exactly the entries of one run of the
  scenario, in order, with three model turns.

Every case runs on each backend (on ``nats`` both processes share the test server).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tackroom.contracts.agents import LINKS_SCOPE
from tackroom.engine import open_engine
from tackroom.runtime import Host, load_worker
from tackroom.testing.backends import BACKENDS, engine_url_for

from ..crashkit import run_killable
from ..faults.report import SOAK
from ..turn.harness import messages_of, turn_of
from .crash_agents import CASES, LEAD, LEAD_RUN, STARTS_LOG, CrashCase, child_session
from .scenario import CALLS, FINAL

CHILD_TIMEOUT = 40.0

LEAD_ENTRIES = [
    (f"{LEAD_RUN}-m0", "user"),
    (f"{LEAD_RUN}-t1-a", "assistant"),
    (f"{LEAD_RUN}-fr-{CALLS['alpha']}", "function_result"),
    (f"{LEAD_RUN}-fr-{CALLS['beta']}", "function_result"),
    (f"{LEAD_RUN}-t2-a", "assistant"),
    (f"{LEAD_RUN}-fr-{CALLS['gamma']}", "function_result"),
    (f"{LEAD_RUN}-t3-a", "assistant"),
]


@dataclass
class Output:
    markers: list[dict[str, Any]] = field(default_factory=list)
    returncode: int | None = None

    def holds(self) -> set[str]:
        return {m["name"] for m in self.markers if m["marker"] == "hold"}

    def finished(self) -> dict[str, Any]:
        found = [m for m in self.markers if m["marker"] == "finished"]
        assert found, f"no finished marker in {self.markers}"
        return found[-1]


async def _run_child(
    url: str, workdir: Path, case: CrashCase, phase: str, *, kill_on: set[str] | None
) -> Output:
    output = Output()
    output.returncode = await run_killable(
        "tests.agents.crash_agents",
        [url, str(workdir), f"--case={case.name}", f"--phase={phase}"],
        workdir=workdir,
        phase=phase,
        on_line=output.markers.append,
        kill_when=None if kill_on is None else lambda: kill_on <= output.holds(),
        timeout=CHILD_TIMEOUT,
    )
    return output


NATS_SHORT = ("subagent_call", "child_ended", "parent_resumed")
"""On NATS (seconds a case) the default run takes one point of each phase — the call, a child's
end, the parent's wake; ``make soak`` (``TACKROOM_SOAK=1``) runs every point there too."""


def _cases() -> list[tuple[str, str]]:
    return [
        (backend, name)
        for backend in BACKENDS
        for name in CASES
        if backend == "embedded" or SOAK or name in NATS_SHORT
    ]


@pytest.mark.parametrize(("backend", "name"), _cases())
@pytest.mark.timeout(120)
async def test_a_killed_subagent_scenario_finishes_with_each_child_run_once(
    backend: str, name: str, tmp_path: Path
) -> None:
    case = CASES[name]
    url = engine_url_for(backend, tmp_path)
    await _run_child(url, tmp_path, case, "first", kill_on=case.hold_names)
    resumed = await _run_child(url, tmp_path, case, "resume", kill_on=None)
    final = resumed.finished()
    assert (final["state"], final["stop_reason"]) == ("stopped", "end")
    assert final["output"] == FINAL

    host = Host(engine=open_engine(url), workers=[load_worker("engine"), load_worker("sessions")])
    async with host:
        engine = host.engine
        lead = await turn_of(engine, LEAD)
        lead_entries = await messages_of(engine, LEAD)
        links = await engine.list_state(LINKS_SCOPE)
        children = {n: child_session(n) for n in CALLS}
        records = {n: await turn_of(engine, s) for n, s in children.items()}
        entries = {n: await messages_of(engine, s) for n, s in children.items()}
        listed = await engine.trigger("session-tree::list", {})
    starts = (tmp_path / STARTS_LOG).read_text().splitlines()

    # The parent: one run, woken once per batch, its session exactly as uninterrupted.
    assert lead is not None
    assert (lead.state, lead.stop_reason, lead.turn_count) == ("stopped", "end", 3)
    assert [(e["entry_id"], e["message"]["role"]) for e in lead_entries] == LEAD_ENTRIES
    # Each child: started once, one run, ended normally.
    assert sorted(entry.key for entry in links) == sorted(children.values())
    sessions = {s["session_id"] for s in listed["sessions"]}
    assert sessions == {LEAD, *children.values()}
    for name_, session in children.items():
        record = records[name_]
        assert record is not None
        assert record.parent is not None
        assert record.parent.function_call_id == CALLS[name_]
        assert (record.state, record.stop_reason, record.turn_count) == ("stopped", "end", 1)
        assert [e["message"]["role"] for e in entries[name_]] == ["custom", "user", "assistant"]
        assert all(e["entry_id"].startswith(record.run_id) for e in entries[name_])
        new_starts = [line for line in starts if line.startswith(f"{session} ")]
        assert len(new_starts) <= 1, new_starts  # never a second child for one call
    assert len([line for line in starts if line.startswith(f"{LEAD} ")]) == 1
