"""``bench/memory.py --items 200 --queries 5 --no-postgres`` prints a report of this shape
(timings are not checked)."""

from __future__ import annotations

from .running import bench_report


def test_a_short_run_reports_every_figure() -> None:
    report = bench_report("memory.py", "--items", "200", "--queries", "5", "--no-postgres")
    assert (report["schema_version"], report["benchmark"], report["items"]) == (1, "memory", 200)
    assert {"cores", "loadavg_1m"} <= set(report["machine"])
    [sqlite] = report["results"]
    assert sqlite["backend"] == "sqlite-fts5"
    for figure in ("store_search", "bus_search"):
        assert sqlite[figure]["samples"] == 5
        assert 0 < sqlite[figure]["p50_ms"] <= sqlite[figure]["p99_ms"]
    assert sqlite["store_search"]["thread_cpu_p50_ms"] > 0
    assert sqlite["store_mb"] > 0
