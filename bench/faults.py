"""The fault-injection suite, run and counted: one JSON document on stdout.

    .venv/bin/python bench/faults.py           # the short suite (what `make test` runs), ~3 min
    .venv/bin/python bench/faults.py --soak    # the long one (`make soak`): many more trials

It runs pytest over ``tests/faults/`` (harnesses SIGKILLed mid-turn on both backends, a NATS
server killed and briefly stopped, a 3-node NATS cluster losing a node and restarted node by
node, a full disk, fuzzed input boundaries) and the engine-file fault tests beside the engine and
the CLI (a damaged, emptied, locked or read-only database, a read-only or unsafe directory, a full
disk under the queue), with ``TACKROOM_FAULTS_FIGURES`` naming a file where each trial adds its
counts (``tests/faults/report.py``). It prints:

- ``totals``: trials, processes killed (and outages), turns, turns completed, and the counts that
  must be 0 — runs that did not end ``end``, duplicated side effects, skipped calls, entries lost
  or changed, event gaps, reissued events, events after ``agent_end``, tracebacks,
  scripted-model surprises; ``error_results`` (calls answered "outcome unknown" after a kill)
  are allowed and counted;
- ``faults_seen``: what each non-zero count saw (session, entry or event);
- ``scenarios``: the same per scenario and backend;
- ``tests``: passed / failed / skipped / xfailed per test file (the file-fault tests assert one
  line and no traceback themselves);
- ``ok``: every test passed (or was an expected failure) and every must-be-0 count is 0.

A summary line goes to stderr. The exit status is pytest's (non-zero if a trial failed), so
``make soak`` fails when the suite does.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.faults.report import FIGURES_ENV, Tally  # noqa: E402

SUITE = [
    "tests/faults",
    "tests/agents/test_subagent_crashes.py",
    "tests/engine/test_embedded_files.py",
    "tests/engine/test_embedded_full_disk.py",
    "tests/cli/test_engine_files_cli.py",
    "tests/nats/test_leader_reads.py",
]
COUNTS = [name for name in Tally.__dataclass_fields__ if name not in ("error_texts", "details")]


def _tests(junit: Path) -> dict[str, dict[str, int]]:
    """Outcomes per test file from pytest's JUnit XML."""
    out: dict[str, dict[str, int]] = defaultdict(
        lambda: {"passed": 0, "failed": 0, "skipped": 0, "xfailed": 0}
    )
    if not junit.exists():
        return {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        parts = case.get("classname", "").split(".")
        module = next((i for i, part in enumerate(parts) if part.startswith("test_")), -1)
        path = "/".join(parts[: module + 1]) + ".py"
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error"):
                outcome = "failed"
            elif child.tag == "skipped":
                xfail = (child.get("type") or "") == "pytest.xfail"
                outcome = "xfailed" if xfail else "skipped"
        out[path][outcome] += 1
    return dict(sorted(out.items()))


def _figures(
    path: Path,
) -> tuple[dict[str, int], dict[str, dict[str, Any]], list[str], list[str]]:
    totals = dict.fromkeys(COUNTS, 0)
    scenarios: dict[str, dict[str, Any]] = {}
    errors: list[str] = []
    details: list[str] = []
    if not path.exists():
        return totals, scenarios, errors, details
    for line in path.read_text().splitlines():
        trial = json.loads(line)
        key = f"{trial['scenario']}/{trial['backend']}"
        into = scenarios.setdefault(key, dict.fromkeys(COUNTS, 0))
        for name in COUNTS:
            into[name] += trial[name]
            totals[name] += trial[name]
        errors += trial.get("error_texts", [])
        details += [f"{key}: {line}" for line in trial.get("details", [])]
    return totals, scenarios, errors, details


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--soak", action="store_true", help="the long mode (TACKROOM_SOAK=1)")
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --)")
    args = parser.parse_args()

    env = dict(os.environ)
    if args.soak:
        env["TACKROOM_SOAK"] = "1"
    soak = env.get("TACKROOM_SOAK") == "1"
    with tempfile.TemporaryDirectory(prefix="tackroom-faults-") as scratch:
        figures = Path(scratch) / "figures.jsonl"
        junit = Path(scratch) / "junit.xml"
        env[FIGURES_ENV] = str(figures)
        started = time.monotonic()
        before = machine()
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        command += [f"--junitxml={junit}", *SUITE, *args.pytest_args]
        # pytest's own output goes to stderr, so stdout holds only the JSON document.
        status = subprocess.run(command, cwd=ROOT, env=env, stdout=sys.stderr, check=False)
        seconds = round(time.monotonic() - started, 1)
        totals, scenarios, errors, details = _figures(figures)
        tests = _tests(junit)

    must_be_zero = {name: totals[name] for name in Tally.MUST_BE_ZERO}
    failed = sum(t["failed"] for t in tests.values())
    report = {
        "schema_version": 1,
        "mode": "soak" if soak else "short",
        "machine": before,
        "seconds": seconds,
        "pytest_exit": status.returncode,
        "ok": status.returncode == 0 and failed == 0 and not any(must_be_zero.values()),
        "totals": totals,
        "scenarios": dict(sorted(scenarios.items())),
        "error_results_said": sorted(set(errors)),
        "faults_seen": details,
        "tests": tests,
    }
    print(json.dumps(report, indent=2))
    passed = sum(t["passed"] for t in tests.values())
    print(
        f"faults ({report['mode']}): trials {totals['trials']}, kills and outages "
        f"{totals['kills']}, turns completed {totals['completed']}/{totals['turns']}, "
        f"duplicated effects {totals['duplicated_effects']}, lost/changed entries "
        f"{totals['lost_or_changed_entries']}, reissued events {totals['reissued_events']}, "
        f"events after the end {totals['events_after_end']}, "
        f"event gaps {totals['event_gaps']}, skipped calls {totals['skipped_calls']}, "
        f"unfinished {totals['unfinished']}, ended by an outage {totals['ended_by_outage']}, "
        f"stranded by a dead-lettered step {totals['dead_lettered']}, "
        f"tracebacks {totals['tracebacks']}; "
        f"tests passed {passed}, failed {failed}; {seconds} s",
        file=sys.stderr,
    )
    return status.returncode


if __name__ == "__main__":
    sys.exit(main())
