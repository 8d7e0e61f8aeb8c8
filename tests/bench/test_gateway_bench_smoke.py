"""``bench/gateway.py`` on a few samples prints a report of this shape (timings are not checked)."""

from __future__ import annotations

from .running import bench_report


def test_a_short_run_reports_every_figure_and_target() -> None:
    args = ["--samples", "2", "--events", "50", "--rounds", "1", "--clients", "5", "--settle", "0"]
    args += ["--auth-samples", "3"]
    report = bench_report("gateway.py", *args)
    assert (report["schema_version"], report["benchmark"]) == (1, "gateway")
    assert {"cores", "loadavg_1m"} <= set(report["machine"])
    figures = report["figures"]
    assert figures["first_token"]["samples"] == 2
    assert figures["first_token"]["direct_p50_ms"] > 0
    assert figures["per_event"]["events"] == 50
    assert figures["idle_clients"]["clients"] == 5
    assert figures["auth"]["samples"] == 3
    for kind in ("shared_token", "api_key", "api_key_cold", "oidc", "oidc_cold"):
        assert figures["auth"][kind]["median_us"] > 0
    assert set(report["targets"]) == {
        "first_token_added_ms",
        "per_event_added_us",
        "idle_client_kib",
        "api_key_added_ms",
        "oidc_added_ms",
    }
