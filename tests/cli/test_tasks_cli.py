"""``tackroom tasks``: a bad file is refused with its line before anything boots; the example
graph runs to its end; status, graph, detach, resume and cancel from the command line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tackroom.testing.cli import run_tackroom

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "tasks" / "tasks.yaml"


async def test_a_cyclic_or_dangling_graph_is_refused_with_its_line_and_nothing_starts(
    tmp_path: Path,
) -> None:
    (tmp_path / "cycle.yaml").write_text(
        "steps:\n  - id: a\n    call: clock::now\n    depends_on: [b]\n"
        "  - id: b\n    call: clock::now\n    depends_on: [a]\n"
    )
    (tmp_path / "dangling.yaml").write_text(
        "steps:\n  - id: a\n    call: clock::now\n    input: {t: '${steps.gone.output}'}\n"
    )
    result = await run_tackroom("tasks", "run", "cycle.yaml", cwd=tmp_path)
    assert result.code == 2
    assert result.stderr == "tackroom: error: cycle.yaml:7: steps form a cycle: a -> b -> a\n"
    result = await run_tackroom("tasks", "run", "dangling.yaml", cwd=tmp_path)
    assert result.code == 2
    assert result.stderr.startswith("tackroom: error: dangling.yaml:4: step 'a': ${steps.gone")
    assert not (tmp_path / ".tackroom").exists()  # no engine opened: nothing enqueued
    result = await run_tackroom("tasks", "graph", "cycle.yaml", cwd=tmp_path)
    assert (result.code, result.stderr.count("\n")) == (2, 1)


async def test_the_example_runs_and_its_status_reads_back(tmp_path: Path) -> None:
    shutil.copy(EXAMPLE, tmp_path / "tasks.yaml")
    result = await run_tackroom(
        "tasks", "run", "tasks.yaml", "--input", "threshold=5", "--run-id", "ex1", cwd=tmp_path
    )
    assert result.code == 0, result.stderr
    assert result.stdout.startswith("run ex1 (started)\n")
    assert "run ex1 succeeded" in result.stdout
    outputs = json.loads(result.stdout.split("run ex1 succeeded\n", 1)[1])
    assert (outputs["total"], outputs["doubled"]) == (12, 24)
    status = await run_tackroom("tasks", "status", "ex1", cwd=tmp_path)
    assert status.code == 0, status.stderr
    assert status.stdout.splitlines()[0] == "run ex1 (clock-and-sums): succeeded"
    assert "  lengths x3: succeeded" in status.stdout
    record = json.loads(
        (await run_tackroom("tasks", "status", "ex1", "--json", cwd=tmp_path)).stdout
    )
    assert record["steps"]["big"]["status"] == "succeeded"
    missing = await run_tackroom("tasks", "status", "nope", cwd=tmp_path)
    assert (missing.code, missing.stderr) == (1, "tackroom: error: no task run 'nope'\n")


async def test_graph_draws_a_tree_and_mermaid(tmp_path: Path) -> None:
    tree = await run_tackroom("tasks", "graph", str(EXAMPLE), cwd=tmp_path)
    assert tree.code == 0
    assert "├─ total: calc::evaluate (retry 3, timeout 5s)  ← lengths" in tree.stdout
    chart = await run_tackroom("tasks", "graph", str(EXAMPLE), "--format", "mermaid", cwd=tmp_path)
    assert chart.stdout.startswith("flowchart TD\n")
    assert "    total --> big" in chart.stdout


async def test_a_run_waiting_for_approval_is_approved_resumed_or_cancelled(
    tmp_path: Path,
) -> None:
    (tmp_path / "gated.yaml").write_text(
        "name: gated\nsteps:\n  - {id: a, call: clock::now, requires_approval: true}\n"
        "  - {id: b, call: clock::now, depends_on: [a]}\n"
    )
    parked = await run_tackroom("tasks", "run", "gated.yaml", "--run-id", "g1", cwd=tmp_path)
    assert parked.code == 3, parked.stderr
    assert "  a                        awaiting_approval: tackroom approve tasks.g1 a\n" in (
        parked.stdout
    )
    approved = await run_tackroom("approve", "tasks.g1", "a", cwd=tmp_path)
    assert approved.code == 0, approved.stderr
    resumed = await run_tackroom("tasks", "resume", "g1", cwd=tmp_path)
    assert resumed.code == 0, resumed.stderr
    assert "run g1 succeeded" in resumed.stdout
    started = await run_tackroom(
        "tasks", "run", "gated.yaml", "--run-id", "g2", "--detach", cwd=tmp_path
    )
    assert (started.code, started.stdout) == (0, "run g2 (started)\n")
    cancelled = await run_tackroom("tasks", "cancel", "g2", cwd=tmp_path)
    assert (cancelled.code, cancelled.stdout) == (0, "run g2: cancelled\n")
    status = await run_tackroom("tasks", "status", "g2", cwd=tmp_path)
    assert status.stdout.splitlines()[0] == "run g2 (gated): cancelled"
