"""Helpers shared by the benchmarks in ``bench/``: percentiles and the machine description."""

from __future__ import annotations

import os
import platform
import sqlite3
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

__all__ = ["machine", "p50_p99"]


def p50_p99(samples: list[float]) -> tuple[float, float]:
    """The median and the 99th percentile (nearest rank) of ``samples`` (not empty)."""
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return statistics.median(ordered), p99


def machine() -> dict[str, Any]:
    cpu = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "sqlite": sqlite3.sqlite_version,
        "loadavg_1m": round(os.getloadavg()[0], 2),
    }


def summarize_ms(samples: list[float]) -> dict[str, float]:
    """p50 and p99 of ``samples`` (seconds) in milliseconds, and how many there were."""
    p50, p99 = p50_p99(samples)
    return {"p50_ms": round(p50 * 1e3, 3), "p99_ms": round(p99 * 1e3, 3), "samples": len(samples)}


async def timed(call: Callable[[], Awaitable[Any]]) -> float:
    """Seconds ``await call()`` took."""
    start = time.perf_counter()
    await call()
    return time.perf_counter() - start
