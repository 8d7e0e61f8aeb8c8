"""On embedded, a batch of subagent calls commits in one transaction: the calls' start events,
each child's start (its link, session and turn record) and the lead's parking — a step cut short
starts no child, and a subagent call costs one commit, not three."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tackroom.contracts.agents import AgentDefinition, child_ids
from tackroom.testing import FunctionModel
from tackroom.testing.backends import engine_url_for

from .scenario import harness_for, helper_answer


def _transactions(statements: list[str]) -> list[list[str]]:
    groups: list[list[str]] = []
    current: list[str] | None = None
    for statement in statements:
        if statement.startswith("BEGIN"):
            current = []
        elif statement.startswith("COMMIT") and current is not None:
            groups.append(current)
            current = None
        elif current is not None:
            current.append(statement)
    return groups


async def test_the_calls_start_the_childs_start_and_the_parking_are_one_commit(
    tmp_path: Path,
) -> None:
    helper = AgentDefinition(name="helper", instructions="[agent:helper]")
    harness = harness_for(
        tmp_path,
        engine=engine_url_for("embedded", tmp_path),
        model=FunctionModel(helper_answer),
        agents=[helper],
    )
    statements: list[str] = []
    async with harness:
        db = harness.engine._store._db  # type: ignore[attr-defined]  # white-box: its SQL
        assert isinstance(db, sqlite3.Connection)
        db.set_trace_callback(statements.append)
        try:
            result = await harness.run("go", session="lead", run_id="run-lead")
        finally:
            db.set_trace_callback(None)
    assert result.output == "lead: helped"
    child, _ = child_ids("lead", "run-lead", "call-help", "helper")
    starts = [
        group
        for group in _transactions(statements)
        if any(f"'turns', '{child}'" in s and '"state":"provisioning"' in s for s in group)
    ]
    assert len(starts) == 1, "the child's turn record was created in more than one commit"
    (start,) = starts
    assert any("'subagent-links'" in s and child in s for s in start)
    assert any("'turns', 'lead'" in s and '"function_awaiting_approval"' in s for s in start)
    assert any("call-help:start" in s and "function_execution_start" in s for s in start)
