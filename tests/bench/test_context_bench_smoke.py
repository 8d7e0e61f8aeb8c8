"""``bench/context.py`` on small sessions prints a report of this shape (timings not checked)."""

from __future__ import annotations

from .running import bench_report


def test_a_short_run_reports_every_figure() -> None:
    report = bench_report(
        "context.py",
        *("--sizes", "10,100", "--calls", "5", "--memory-items", "200", "--memory-queries", "5"),
    )
    assert (report["schema_version"], report["benchmark"]) == (1, "context")
    assert {"cores", "loadavg_1m"} <= set(report["machine"])
    for shape in ("whole", "compacted"):
        figures = report["assembly"][shape]
        assert [f["entries"] for f in figures] == [10, 100]
        for figure in figures:
            assert figure["samples"] == 5
            assert 0 < figure["p50_ms"] <= figure["p99_ms"]
    whole, compacted = report["assembly"]["whole"][1], report["assembly"]["compacted"][1]
    assert whole["messages_sent"] == 105  # every entry, and each call's new one
    assert compacted["messages_sent"] < whole["messages_sent"]  # a summary and what it kept
    memory = report["memory_search"]
    assert (memory["items"], memory["backend"], memory["search"]["samples"]) == (
        200,
        "sqlite-fts5",
        5,
    )
    assert memory["bus_search"]["samples"] == 5
