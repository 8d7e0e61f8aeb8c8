"""``bench/peers.py`` on the two systems that need no peer installed (the floor and tackroom), with
tiny sizes, prints a report of this shape; a system whose packages are missing is skipped.

Only the shape is checked: timings on a shared machine are the benchmark's business, not a test's.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from .running import BENCH_DIR, bench_report

FIGURES = {"wall_p50_ms", "wall_p90_ms", "cpu_p50_ms", "cpu_p90_ms", "samples_per_round"}


def run_bench(*args: str) -> dict[str, Any]:
    return bench_report("peers.py", *args, timeout=55)


def test_floor_and_tackroom_report_medians_and_ratios() -> None:
    report = run_bench(
        *("--only", "floor", "--only", "tackroom"),
        *("--rounds", "2", "--turns", "3", "--warmup", "1", "--same-session", "2"),
    )

    assert report["schema_version"] == 1
    assert report["benchmark"] == "peers"
    assert {"cpu", "cores", "python", "sqlite", "loadavg_1m_at_start"} <= set(report["machine"])
    systems = report["systems"]
    assert set(systems) == {"floor", "tackroom"}
    for name, system in systems.items():
        assert "error" not in system, system
        assert system["rounds"] == 2
        assert {"version", "persistence", "streaming"} <= set(system)
        assert set(system["fresh_session"]) == FIGURES
        assert set(system["same_session"]) == FIGURES, name
        assert system["fresh_session"]["samples_per_round"] == 3
        assert len(system["per_round_p50_ms"]["fresh_session.cpu"]) == 2
    ratios = report["ratios"]["fresh_session.wall_p50_ms"]
    assert ratios["vs_floor"]["floor"] == 1.0
    assert ratios["vs_tackroom"]["tackroom"] == 1.0
    assert set(ratios["vs_floor"]) == {"floor", "tackroom"}
    # No peer ran, so there is no fastest peer to compare tackroom with.
    assert report["tackroom_vs_fastest_peer"] == {}


def test_one_system_run_in_process_prints_its_figures() -> None:
    report = run_bench("--system", "floor", "--turns", "2", "--warmup", "0", "--same-session", "0")

    assert report["system"] == "floor"
    assert report["fresh_session"]["samples"] == 2
    assert set(report["fresh_session"]["wall"]) == {"p50_ms", "p90_ms"}
    assert "same_session" not in report


@pytest.fixture
def peers(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """``bench/peers.py`` as a module (the bench's own modules are dropped again afterwards)."""
    before = set(sys.modules)
    monkeypatch.syspath_prepend(str(BENCH_DIR))
    yield importlib.import_module("peers")
    for name in set(sys.modules) - before:
        if name.split(".")[0] in ("peers", "peers_systems", "_common"):
            del sys.modules[name]


def test_a_system_whose_packages_are_missing_is_skipped(peers: Any) -> None:
    system = peers.System("absent", "floor", ("tackroom_no_such_module", "os.no_such_child"))

    assert peers.missing(system) == ["tackroom_no_such_module", "os.no_such_child"]
    summary = peers.summarize([{"system": "absent", "skipped": peers.SKIPPED, "missing": []}])
    assert summary["skipped"] == "not installed: pip install 'tackroom[bench]'"
