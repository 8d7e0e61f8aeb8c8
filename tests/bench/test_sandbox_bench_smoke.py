"""``bench/sandbox.py --quick`` prints a report of this shape (timings are not checked)."""

from __future__ import annotations

import shutil

import pytest

from .running import bench_report


@pytest.mark.skipif(
    shutil.which("bwrap") is None,
    reason="bubblewrap is not installed (apt-get install bubblewrap; make setup installs it)",
)
def test_a_quick_run_reports_every_figure() -> None:
    report = bench_report("sandbox.py", "--quick", timeout=180)
    assert (report["schema_version"], report["benchmark"]) == (1, "sandbox")
    assert {"cores", "loadavg_1m", "euid"} <= set(report["machine"])
    figures = report["figures"]
    cold = figures["cold_start"]
    for name in ("bwrap", "process", "bwrap_floor", "python"):
        assert 0 < cold[name]["p50_ms"] <= cold[name]["p99_ms"], cold[name]
    assert isinstance(cold["target"]["pass"], bool)
    for name in ("sandbox_run", "shell_run"):
        assert figures["bus_round_trip"][name]["n"] == 20
    assert isinstance(figures["gated_turn"]["shell_run_share_ms"], float)
    assert isinstance(figures["boot"]["added_ms"], float)
