"""``bench/replay.py --quick --turns 4 --repeats 1`` prints a report of this shape (timings are
not checked: the machine is shared)."""

from __future__ import annotations

from .running import bench_report


def test_a_short_run_reports_the_replay_speed_and_its_target() -> None:
    report = bench_report("replay.py", "--quick", "--turns", "4", "--repeats", "1")
    assert (report["schema_version"], report["benchmark"], report["quick"]) == (1, "replay", True)
    assert {"cores", "loadavg_1m", "loadavg_1m_at_start"} <= set(report["machine"])
    assert (report["workload"]["turns"], report["workload"]["tool_calls"]) == (4, 3)
    results = report["results"]
    for figure in ("turns_per_s", "ms_per_turn", "cpu_turns_per_s", "cpu_ms_per_turn"):
        assert isinstance(results[figure], float), figure
    assert set(results["replay_s"]) == {"4_turns_p50", "1_turn_p50"}
    assert results["export_ms"] > 0
    assert results["cassette_bytes"] > 0
    [target] = report["targets"]
    assert target["target"] == "turns_per_s >= 500"
    assert target["pass"] == (target["value"] >= 500)
