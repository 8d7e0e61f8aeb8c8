"""Run one of ``bench/`` as a user would and read the JSON report it prints."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

__all__ = ["BENCH_DIR", "bench_report"]

BENCH_DIR = Path(__file__).resolve().parents[2] / "bench"


def bench_report(script: str, *args: str, timeout: float = 120) -> dict[str, Any]:
    """``python bench/SCRIPT ARGS`` in a process of its own; it must exit 0 and print JSON."""
    done = subprocess.run(
        [sys.executable, str(BENCH_DIR / script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report
