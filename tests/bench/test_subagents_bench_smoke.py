"""``bench/subagents.py --quick`` runs the subagent workload and prints a JSON report of this shape.

Only the shape is checked: timings on a shared machine are the benchmark's business, not a test's.
"""

from __future__ import annotations

import subprocess
import sys

from .running import BENCH_DIR, bench_report


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


def test_no_samples_is_refused_in_one_line() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH_DIR / "subagents.py"), "--samples", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].endswith("--samples must be at least 1, not 0")
