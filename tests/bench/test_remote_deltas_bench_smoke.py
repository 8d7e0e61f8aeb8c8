"""``bench/remote_deltas.py --quick`` follows live frames from another process through the local
endpoint and prints a report of this shape (the figures are the benchmark's business)."""

from __future__ import annotations

from .running import bench_report


def test_quick_run_reports_latency_and_cpu_per_frame() -> None:
    report = bench_report("remote_deltas.py", "--quick")

    assert report["schema_version"] == 1
    assert report["benchmark"] == "remote_deltas"
    assert {"cpu", "cores", "loadavg_1m"} <= set(report["machine"])
    for phase in ("idle", "busy"):
        latency = report["latency"][phase]
        assert 0 < latency["in_process_p50_us"] <= latency["in_process_p99_us"]
        assert 0 < latency["remote_p50_us"] <= latency["remote_p99_us"]
    assert report["latency"]["frames"] == 50
    paced, burst = report["cpu"]["paced"], report["cpu"]["burst"]
    assert (paced["frames"], burst["frames"]) == (50, 200)
    assert paced["client_us_per_frame"] > 0
    assert burst["frames_per_poll"] >= 1
