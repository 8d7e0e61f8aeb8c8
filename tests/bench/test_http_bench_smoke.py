"""``bench/http_fetch.py --samples 3`` prints a report of this shape (timings are not checked)."""

from __future__ import annotations

from .running import bench_report


def test_a_short_run_reports_every_figure() -> None:
    report = bench_report("http_fetch.py", "--samples", "3")
    assert (report["schema_version"], report["benchmark"]) == (1, "http")
    assert {"cores", "loadavg_1m"} <= set(report["machine"])
    figures = report["figures"]
    for name in ("bus_fetch", "direct_fresh_client", "direct_shared_client"):
        assert figures[name]["samples"] == 3
        assert 0 < figures[name]["p50_ms"] <= figures[name]["p99_ms"]
    assert isinstance(figures["overhead_ms"], float)
