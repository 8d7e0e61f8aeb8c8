"""SIGKILL during compaction, then restart: exactly one compaction entry, no entry lost, and the
run finishes with the pinned rule in its context — on every engine backend.

Three kill points (``POINTS`` in ``crash_child.py``): while the summary call is in flight;
after the summary is written, before its entry is appended; after the entry is stored, while
the turn's own model call is in flight (the turn step not committed).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tackroom.contracts.context import COMPACTION_TYPE, CompactionDetails
from tackroom.engine import open_engine
from tackroom.runtime import Host, load_worker
from tackroom.testing.backends import BACKENDS, engine_url_for
from tests.crashkit import run_killable
from tests.workers.compactor.crash_child import POINTS, RUN_ID, SESSION, history

CHILD_TIMEOUT = 30.0


async def run_child(url: str, workdir: Path, point: str, phase: str) -> list[dict[str, Any]]:
    """The child's markers; the ``first`` phase is killed with SIGKILL once it holds."""
    markers: list[dict[str, Any]] = []

    def holding() -> bool:
        return bool(markers) and markers[-1]["marker"] == "hold"

    await run_killable(
        "tests.workers.compactor.crash_child",
        [url, str(workdir), f"--point={point}", f"--phase={phase}"],
        workdir=workdir,
        phase=phase,
        on_line=markers.append,
        kill_when=holding if phase == "first" else None,
        timeout=CHILD_TIMEOUT,
    )
    return markers


@pytest.mark.parametrize("backend", sorted(BACKENDS))
@pytest.mark.parametrize("point", sorted(POINTS))
async def test_a_compaction_killed_midway_is_stored_once(
    backend: str, point: str, tmp_path: Path
) -> None:
    url = engine_url_for(backend, tmp_path)
    first = await run_child(url, tmp_path, point, "first")
    assert [m["marker"] for m in first] == ["started", "hold"]
    resumed = await run_child(url, tmp_path, point, "resume")
    finished = resumed[-1]
    assert finished["marker"] == "finished"
    assert (finished["state"], finished["stop_reason"]) == ("stopped", "end")
    assert finished["saw_rule"]
    assert all(finished["saw_rule"])

    host = Host(engine=open_engine(url), workers=[load_worker("engine"), load_worker("sessions")])
    async with host:
        tree = await host.engine.trigger("session-tree::tree", {"session_id": SESSION})
    entries = [entry for node in _nodes(tree["roots"]) for entry in node["entries"]]
    ids = [entry["entry_id"] for entry in entries]
    assert len(ids) == len(set(ids))
    compactions = [entry for entry in entries if entry["type"] == COMPACTION_TYPE]
    assert len(compactions) == 1, [c["entry_id"] for c in compactions]
    details = CompactionDetails.model_validate(compactions[0]["message"]["details"])
    assert "rule" not in details.replaces
    history_ids = [entry_id for entry_id, _ in history()]
    assert set(history_ids) <= set(ids), "an entry of the history was lost"
    assert set(details.replaces) <= set(history_ids)
    answers = [i for i in ids if i.startswith(f"{RUN_ID}-") and i.endswith("-a")]
    assert answers == [f"{RUN_ID}-t1-a"]


def _nodes(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    found = []
    for node in nodes:
        found.append(node)
        found.extend(_nodes(node["children"]))
    return found
