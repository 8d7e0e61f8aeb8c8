"""``bench/subagents.py --quick`` runs the subagent workload and prints a JSON report of this shape.

Only the shape is checked: timings on a shared machine are the benchmark's business, not a test's.
"""

from __future__ import annotations

from .running import bench_report


def test_the_subagents_bench_reports_its_overhead() -> None:
    report = bench_report("subagents.py", "--quick")
    assert report["benchmark"] == "subagents"
    assert report["backend"] == "embedded"
    assert {"cpu", "cores", "loadavg_1m"} <= set(report["machine"])
    for section in ("direct_child_run", "subagent_call_wait"):
        assert set(report[section]) == {"p50_ms", "p99_ms"}
        assert report[section]["p50_ms"] > 0
    overhead = report["overhead"]
    assert set(overhead) == {"p50_ms", "p99_ms", "mean_ms", "samples", "target_p50_ms", "pass"}
    assert overhead["samples"] == 5
    assert overhead["target_p50_ms"] == 2.0
    assert overhead["pass"] == (overhead["p50_ms"] <= 2.0)
