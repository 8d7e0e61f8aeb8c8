"""``bench/turn.py --quick`` runs the whole turn workload and prints a JSON report of this shape.

Only the shape is checked: timings on a shared machine are the benchmark's business, not a test's.
"""

from __future__ import annotations

from typing import Any

from .running import bench_report

SECTIONS = {
    "operations": {
        "state_reads",
        "state_writes",
        "stream_appends",
        "triggers",
        "spans",
        "write_transactions",
    },
    "sequential_fresh": {"p50_ms", "p99_ms", "samples"},
    "sequential_same_session": {"p50_ms", "p99_ms", "samples", "turns_per_session"},
    "concurrent": {
        "turns_per_s",
        "p50_ms",
        "p99_ms",
        "samples",
        "sessions",
        "write_transactions_per_turn",
    },
    "storage": {"first_turn", "last_turn", "ratio", "page_bytes_per_turn", "latency_ms"},
    "idle_sessions": {"sessions", "rss_per_session_bytes", "allocated_blocks_per_session"},
    "facade_overhead": {"overhead_us", "replayed_turn", "full_turn", "loadavg_1m"},
    "long_session": {"first_ten_p50_ms", "last_ten_p50_ms", "growth", "turns"},
    "nats_sequential_fresh": {"p50_ms", "p99_ms", "samples"},
    "delta_cost": {"per_delta_cpu_us", "coalesced", "uncoalesced"},
}
TARGETED = {
    "sequential_fresh.p50_ms",
    "sequential_same_session.p50_ms",
    "concurrent.turns_per_s",
    "storage.ratio",
    "idle_sessions.rss_per_session_bytes",
    "facade_overhead.overhead_us",
    "long_session.growth",
    "nats_sequential_fresh.p50_ms",
    "delta_cost.per_delta_cpu_us",
    "operations.write_transactions_per_step",
}


def run_bench(*args: str) -> dict[str, Any]:
    return bench_report("turn.py", "--quick", *args, timeout=90)


def test_quick_run_prints_every_figure_with_its_target() -> None:
    report = run_bench()

    assert report["schema_version"] == 1
    assert report["benchmark"] == "turn"
    assert report["quick"] is True
    assert {"cpu", "cores", "python", "sqlite"} <= set(report["machine"])
    results = report["results"]
    assert set(results) == set(SECTIONS)
    for name, keys in SECTIONS.items():
        assert keys <= set(results[name]), name
    for name in ("sequential_fresh", "sequential_same_session", "concurrent"):
        assert 0 < results[name]["p50_ms"] <= results[name]["p99_ms"]
    assert results["concurrent"]["turns_per_s"] > 0
    assert results["concurrent"]["write_transactions_per_turn"] > 0
    assert results["operations"]["write_transactions"] > 0
    for compared in ("replayed_turn", "full_turn"):
        for clock in ("wall", "cpu"):
            figures = results["facade_overhead"][compared][clock]
            assert figures["bare_p50_us"] > 0
            assert figures["facade_p50_us"] > 0
    storage = results["storage"]
    assert storage["first_turn"]["bytes"] > 0
    assert storage["last_turn"]["turn"] == storage["turns"]
    assert storage["first_turn"]["by_source"]["stream:agent::events"] > 0
    operations = results["operations"]
    assert operations["triggers_by_function"]["calc::add"] == 1
    assert operations["triggers_by_function"]["provider::scripted::stream"] == 2
    assert {entry["figure"] for entry in report["targets"]} == TARGETED
    for entry in report["targets"]:
        assert isinstance(entry["pass"], bool)
        section, figure = entry["figure"].split(".")
        assert results[section]["targets"][figure]["pass"] is entry["pass"]


def test_only_runs_the_named_figure() -> None:
    report = run_bench("--only", "sequential_fresh")

    assert set(report["results"]) == {"sequential_fresh"}
    assert [entry["figure"] for entry in report["targets"]] == ["sequential_fresh.p50_ms"]
