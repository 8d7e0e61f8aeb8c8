"""``bench/startup.py --samples 1`` prints a report of this shape, and the run it measures
imported no provider SDK.

Only the shape is checked: timings on a shared machine are the benchmark's business, not a test's.
"""

from __future__ import annotations

from .running import bench_report


def test_one_sample_reports_the_phases_and_no_provider_sdk() -> None:
    report = bench_report("startup.py", "--samples", "1")

    assert report["schema_version"] == 1
    assert report["benchmark"] == "startup"
    assert {"cpu", "cores", "python", "loadavg_1m"} <= set(report["machine"])
    figures = report["startup"]
    assert {"first_token_ms", "first_token_cpu_ms", "python_start_ms", "pass"} <= set(figures)
    phases = figures["phases_ms"]
    assert 0 < phases["imports"] <= phases["host_started"] <= phases["first_token"]
    assert figures["modules"]["provider_sdks"] == []
    assert figures["samples"] == 1
    assert set(figures["loadavg_1m"]) == {"before", "after"}
