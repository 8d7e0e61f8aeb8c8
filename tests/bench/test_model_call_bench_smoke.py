"""``bench/model_call.py --quick`` prints a report of this shape (timings are the bench's
business, not a test's)."""

from __future__ import annotations

from .running import bench_report


def test_a_quick_run_reports_the_overhead_and_the_parse_cost() -> None:
    report = bench_report("model_call.py", "--quick")

    assert report["bench"] == "model_call"
    assert {"cpu", "cores", "python", "loadavg_1m"} <= set(report["machine"])
    results = report["results"]
    assert results["bare_p50_us"] > 0
    assert results["unsubscribed_p50_us"] > 0
    assert results["text_parse_us"] > 0
    assert results["overhead_us"] == round(
        results["unsubscribed_p50_us"] - results["bare_p50_us"], 2
    )
    assert set(results["targets"]["overhead_us"]) == {"target", "value", "pass"}
