"""Start-up benchmark: ``tackroom run`` on the scripted provider, spawn to first token; one JSON.

    python bench/startup.py [--samples N]
    python bench/startup.py --profile [--top N]    # cProfile of one run in this process, as text

Each sample spawns the installed ``tackroom`` script in a fresh process (``tackroom run hi
--model scripted:m --script turn.yaml --engine embedded::memory:``), through a probe that notes
the time of a few points on the way (``time.perf_counter`` is CLOCK_MONOTONIC, one clock for
every process), then a bare ``python -c pass`` for scale. Samples interleave the two. Figures,
medians over the samples, in ms from the spawn:

- ``first_token_ms``: the first byte of the answer on stdout (the target: <= 300 ms);
- ``first_token_cpu_ms``: CPU time (user + system) the process spent until then, which other
  processes' load inflates far less than the wall clock;
- ``phases_ms``: ``imports`` (the command's modules imported), ``host_started`` (workers'
  modules imported and every worker started), ``first_token``;
- ``python_start_ms``: the bare interpreter;
- ``modules``: how many modules the run had imported at exit (all, ``tackroom``'s), and which
  provider SDKs (it must import none).

Bytecode is cached as an installed package's is: when ``PYTHONDONTWRITEBYTECODE`` is set, the
children write theirs under a temporary ``PYTHONPYCACHEPREFIX``, and one unmeasured run warms it.
The machine is shared and noisy: quote figures from one run, with its ``loadavg_1m``.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import importlib
import io
import json
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from _common import machine

SCHEMA_VERSION = 1
TARGET_MS = 300
ARGV = ["run", "hi", "--model", "scripted:m", "--script", "turn.yaml",
        "--engine", "embedded::memory:"]  # fmt: skip
SCRIPT = "- text: Hello from the script.\n"

PROBE = """\
import atexit, json, sys, time
marks = {"spawned": float(sys.argv.pop(1))}
cpu = {}

class _First:
    def __init__(self, stream):
        self._stream = stream
    def write(self, text):
        if text and "first_token" not in marks:
            marks["first_token"] = time.perf_counter()
            cpu["first_token"] = time.process_time()
        return self._stream.write(text)
    def __getattr__(self, name):
        return getattr(self._stream, name)

sys.stdout = _First(sys.stdout)
import importlib
_import_module = importlib.import_module

def _timed_import(name, package=None):
    # the command's module, imported by main() itself (so it runs as it would unprobed)
    module = _import_module(name, package)
    if name == "tackroom.cli.run" and "imports" not in marks:
        marks["imports"] = time.perf_counter()
        from tackroom.runtime.host import Host
        start = Host.start
        async def timed_start(self):
            await start(self)
            marks["host_started"] = time.perf_counter()
        Host.start = timed_start
    return module

importlib.import_module = _timed_import

def _report():
    spawned = marks.pop("spawned")
    names = sorted(sys.modules)
    print("PROBE " + json.dumps({
        "ms": {k: (v - spawned) * 1000 for k, v in marks.items()},
        "cpu_ms": {k: v * 1000 for k, v in cpu.items()},
        "modules": len(names),
        "tackroom_modules": sum(n.split(".")[0] == "tackroom" for n in names),
        "sdks": [m for m in ("openai", "anthropic", "nats", "cedarpy") if m in sys.modules],
    }), file=sys.stderr)
atexit.register(_report)
import runpy
runpy.run_path(sys.argv.pop(1), run_name="__main__")
"""


@contextlib.contextmanager
def workdir() -> Iterator[tuple[Path, dict[str, str], str]]:
    """A directory holding the script, the children's environment, and how bytecode is cached."""
    with tempfile.TemporaryDirectory(prefix="tr-startup-") as directory:
        (Path(directory) / "turn.yaml").write_text(SCRIPT)
        env = dict(os.environ)
        bytecode = "as installed"
        if env.pop("PYTHONDONTWRITEBYTECODE", None) or sys.flags.dont_write_bytecode:
            env["PYTHONPYCACHEPREFIX"] = str(Path(directory) / "pycache")
            bytecode = "a temporary PYTHONPYCACHEPREFIX (PYTHONDONTWRITEBYTECODE was set)"
        yield Path(directory), env, bytecode


def one_run(directory: Path, env: dict[str, str]) -> dict[str, Any]:
    script = Path(sys.executable).with_name("tackroom")
    spawned = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-c", PROBE, repr(spawned), str(script), *ARGV],
        cwd=directory, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert process.stdout is not None
    process.stdout.read(1)
    first_byte = (time.perf_counter() - spawned) * 1000
    _, err = process.communicate(timeout=120)
    probe = next((line for line in err.decode().splitlines() if line.startswith("PROBE ")), None)
    if process.returncode != 0 or probe is None:
        raise SystemExit(f"tackroom run failed ({process.returncode}):\n{err.decode()}")
    report: dict[str, Any] = json.loads(probe.removeprefix("PROBE "))
    report["first_byte_ms"] = first_byte
    return report


def bare_start(env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True, env=env)
    return (time.perf_counter() - started) * 1000


def median(values: list[float]) -> float:
    return round(statistics.median(values), 1)


def measure(samples: int) -> dict[str, Any]:
    """The start-up figures (the module docstring says which)."""
    load_before = round(os.getloadavg()[0], 2)
    with workdir() as (directory, env, bytecode):
        one_run(directory, env)  # warm the bytecode and the page cache; not counted
        runs, bare = [], []
        for _ in range(samples):
            runs.append(one_run(directory, env))
            bare.append(bare_start(env))
    first = [r["first_byte_ms"] for r in runs]
    last = runs[-1]
    return {
        "first_token_ms": median(first),
        "first_token_min_ms": round(min(first), 1),
        "first_token_cpu_ms": median([r["cpu_ms"]["first_token"] for r in runs]),
        "phases_ms": {
            phase: median([r["ms"][phase] for r in runs])
            for phase in ("imports", "host_started", "first_token")
        },
        "python_start_ms": median(bare),
        "modules": {
            "all": last["modules"],
            "tackroom": last["tackroom_modules"],
            "provider_sdks": last["sdks"],
        },
        "target_ms": TARGET_MS,
        "pass": median(first) <= TARGET_MS,
        "samples": samples,
        "bytecode": bytecode,
        "loadavg_1m": {"before": load_before, "after": round(os.getloadavg()[0], 2)},
    }


def profile(top: int) -> str:
    """cProfile of one ``tackroom run`` (imports included), as text: run in a child process
    whose bytecode is cached as in :func:`measure`, after a run that warms the cache."""
    with workdir() as (directory, env, _):
        child = [sys.executable, __file__, "--profile-here", "--top", str(top)]
        for _ in range(2):
            done = subprocess.run(child, cwd=directory, env=env, capture_output=True, text=True)
            if done.returncode != 0:
                raise SystemExit(f"the profiled run failed:\n{done.stderr}")
    return done.stdout


def profile_here(top: int) -> str:
    profiler = cProfile.Profile()
    stdout, sys.stdout = sys.stdout, io.StringIO()
    profiler.enable()
    try:
        sys.argv = ["tackroom", *ARGV]  # the process's own command line, as the script runs it
        importlib.import_module("tackroom.cli.main").main()
    finally:
        profiler.disable()
        sys.stdout = stdout
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text).strip_dirs()
    stats.sort_stats("cumulative").print_stats(top)
    stats.sort_stats("tottime").print_stats(top)
    return text.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=7)
    parser.add_argument("--profile", action="store_true", help="profile one run, print text")
    parser.add_argument("--top", type=int, default=40, help="rows of the profile")
    parser.add_argument("--profile-here", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.profile_here:
        print(profile_here(args.top))
        return
    if args.profile:
        print(profile(args.top))
        return
    report = {
        "schema_version": SCHEMA_VERSION,
        "benchmark": "startup",
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "command": ["tackroom", *ARGV],
        "startup": measure(args.samples),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
