"""``bench/tasks.py --chain 5 --steps 30`` prints a report of this shape (timings are not
checked)."""

from __future__ import annotations

from .running import bench_report


def test_a_short_run_reports_every_figure() -> None:
    report = bench_report(
        "tasks.py", "--chain", "5", "--steps", "30", "--replay-turns", "3", "--replay-repeats", "1"
    )
    assert (report["schema_version"], report["benchmark"], report["engine"]) == (
        1,
        "tasks",
        "embedded",
    )
    assert {"cores", "loadavg_1m"} <= set(report["machine"])
    per_step = report["per_step"]
    assert (per_step["chain"], per_step["samples"]) == (5, 4)
    assert 0 < per_step["p50_ms"] <= per_step["p99_ms"]
    graph = report["graph_1000"]
    assert graph["steps"] == 30
    assert graph["wall_s"] > 0
    assert graph["record_bytes"] > 0
    replay = report["replay"]
    assert (replay["turns"], replay["repeats"], replay["target_turns_per_s"]) == (3, 1, 500.0)
    assert replay["turns_per_s"] > 0
    assert isinstance(replay["pass"], bool)
