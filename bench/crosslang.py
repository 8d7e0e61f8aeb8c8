"""The cross-language figure of bench/engine.py: ``engine.trigger`` from Python over NATS to an
echo served by a TypeScript worker and to the same echo served by a Python worker.

- ``ts``: ``bench::echo_ts``, served by ``node sdk/typescript/dist/examples/echo.js URL``;
- ``py``: ``bench::echo_py``, served by ``python bench/crosslang.py --serve URL`` (an engine
  opened with ``open_engine``).

Each worker is a process of its own and the calling process serves neither function, so both
calls take the same path (request/reply through the nats-server). After a warm-up the calls are
made in rounds, ``ts`` and ``py`` taking turns (which one goes first alternates). Per call:
wall time (``perf_counter``) and the calling process's CPU time (``process_time``: the time
spent waiting for the answer is not in it). Each worker's CPU time over the measured calls is
read from ``/proc`` (Linux; 10 ms ticks, so only the mean per call is given).

``python bench/crosslang.py --serve URL`` is the Python worker (not a benchmark of its own).
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import os
import shutil
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

from tackroom.engine import Engine, open_engine

__all__ = ["bench_cross_language"]

ROOT = Path(__file__).resolve().parents[1]
ECHO_JS = ROOT / "sdk" / "typescript" / "dist" / "examples" / "echo.js"
TS, PY = "bench::echo_ts", "bench::echo_py"
ROUND = 100  # calls of one target before the other takes its turn
WARMUP = 200
TARGET_RATIO = 1.3  # ts p50 / py p50, the target
PAYLOAD = {"session_id": "s-bench", "n": 1}


# -- the Python worker (this script with --serve) -------------------------------------------------
async def serve(url: str) -> None:
    """Serve ``bench::echo_py`` on ``url`` until SIGTERM."""
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)

    async def echo(payload: Any) -> Any:
        return payload

    engine = open_engine(url)
    await engine.start()
    try:
        await engine.register_function(PY, echo, worker="py-echo")
        print(f"ready: {PY}", flush=True)
        await stop.wait()
    finally:
        await engine.close()


# -- the benchmark --------------------------------------------------------------------------------
_PRCTL = ctypes.CDLL(None).prctl if sys.platform.startswith("linux") else None


def _die_with_parent() -> None:
    """In the child: SIGTERM when the benchmark dies, even by SIGKILL (Linux)."""
    if _PRCTL is not None:
        _PRCTL(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


@asynccontextmanager
async def worker(name: str, *command: str) -> AsyncIterator[asyncio.subprocess.Process]:
    """The process ``command`` once it printed its ``ready:`` line; SIGTERMed on exit."""
    process = await asyncio.create_subprocess_exec(
        *command,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        preexec_fn=_die_with_parent,
    )
    try:
        assert process.stdout is not None
        assert process.stderr is not None
        line = await asyncio.wait_for(process.stdout.readline(), 30)
        if not line.startswith(b"ready:"):
            problem = await asyncio.wait_for(process.stderr.read(), 5)
            raise RuntimeError(f"{name} worker did not start: {line!r} {problem.decode()[-2000:]}")
        yield process
    finally:
        if process.returncode is None:
            process.terminate()
            try:
                await asyncio.wait_for(process.communicate(), 10)
            except TimeoutError:
                process.kill()
                await process.wait()


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU of process ``pid`` so far (``/proc``; ``None`` where there is none)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile(ordered: list[float], q: float) -> float:
    """Nearest-rank percentile ``q`` (0 to 1) of ``ordered`` (sorted, not empty)."""
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summarize(wall: list[float], cpu: list[float], worker_cpu: float | None) -> dict[str, Any]:
    walls, cpus = sorted(wall), sorted(cpu)
    us = 1e6
    return {
        "p50_us": round(percentile(walls, 0.5) * us, 1),
        "p90_us": round(percentile(walls, 0.9) * us, 1),
        "p99_us": round(percentile(walls, 0.99) * us, 1),
        "caller_cpu_p50_us": round(percentile(cpus, 0.5) * us, 1),
        "caller_cpu_p90_us": round(percentile(cpus, 0.9) * us, 1),
        "caller_cpu_mean_us": round(sum(cpus) / len(cpus) * us, 1),
        "worker_cpu_mean_us": None if worker_cpu is None else round(worker_cpu / len(wall) * us, 1),
        "samples": len(wall),
    }


async def call(engine: Engine, function_id: str) -> tuple[float, float]:
    """Wall and calling-process CPU seconds of one ``trigger``; the echo checked after."""
    cpu = time.process_time()
    start = time.perf_counter()
    answer = await engine.trigger(function_id, PAYLOAD, timeout=10)
    wall = time.perf_counter() - start
    spent = time.process_time() - cpu
    if answer != PAYLOAD:
        raise RuntimeError(f"{function_id} answered {answer!r}, not its payload")
    return wall, spent


def missing() -> str | None:
    """Why the figure cannot be made here, or ``None``."""
    if shutil.which("node") is None:
        return "node is not on PATH"
    if not ECHO_JS.exists():
        return f"{ECHO_JS.relative_to(ROOT)} is missing: cd sdk/typescript && npm run build"
    return None


async def measure(url: str, samples: int) -> dict[str, Any]:
    node = shutil.which("node")
    assert node is not None
    caller = open_engine(url)  # creates the namespace; the workers only open it
    await caller.start()
    try:
        async with AsyncExitStack() as stack:
            worker_url = f"{url}&provision=0"
            ts = await stack.enter_async_context(worker("ts", node, str(ECHO_JS), worker_url))
            py = await stack.enter_async_context(
                worker("py", sys.executable, __file__, "--serve", worker_url)
            )
            for _ in range(WARMUP):
                await call(caller, TS)
                await call(caller, PY)
            pids = {TS: ts.pid, PY: py.pid}
            wall: dict[str, list[float]] = {TS: [], PY: []}
            cpu: dict[str, list[float]] = {TS: [], PY: []}
            worker_cpu: dict[str, float | None] = {TS: 0.0, PY: 0.0}
            rounds = max(1, -(-samples // ROUND))
            for index in range(rounds):
                for function_id in (TS, PY) if index % 2 == 0 else (PY, TS):
                    before = cpu_seconds(pids[function_id])
                    for _ in range(ROUND):
                        elapsed, spent = await call(caller, function_id)
                        wall[function_id].append(elapsed)
                        cpu[function_id].append(spent)
                    after = cpu_seconds(pids[function_id])
                    so_far = worker_cpu[function_id]
                    worker_cpu[function_id] = (
                        None
                        if so_far is None or before is None or after is None
                        else so_far + after - before
                    )
    finally:
        await caller.close()
    figures = {
        name: summarize(wall[fid], cpu[fid], worker_cpu[fid])
        for name, fid in (("ts", TS), ("py", PY))
    }
    ratio = figures["ts"]["p50_us"] / figures["py"]["p50_us"]
    return {
        **figures,
        "ratio_ts_py": {
            "p50": round(ratio, 3),
            "p90": round(figures["ts"]["p90_us"] / figures["py"]["p90_us"], 3),
            "caller_cpu_p50": round(
                figures["ts"]["caller_cpu_p50_us"] / figures["py"]["caller_cpu_p50_us"], 3
            ),
        },
        "target": {"ratio_ts_py_p50_max": TARGET_RATIO, "pass": ratio <= TARGET_RATIO},
        "rounds": rounds,
        "calls_per_round": ROUND,
    }


async def bench_cross_language(engine_url: str | None, samples: int) -> dict[str, Any]:
    """The figure, or ``{"skipped": why}`` where node, the built SDK or nats-server is missing.

    ``engine_url``: a ``nats://`` server to use (a namespace of its own is made on it); else a
    nats-server is started for the figure."""
    why = missing()
    if why is not None:
        return {"skipped": why}
    load_before = round(os.getloadavg()[0], 2)
    namespace = f"benchx{uuid.uuid4().hex[:8]}"
    if engine_url is not None and engine_url.startswith(("nats://", "tls://")):
        result = await measure(f"{engine_url.split('?')[0]}?namespace={namespace}", samples)
        server = "given (--engine)"
    else:
        from tackroom.testing.nats import find_nats_server, nats_server

        try:
            find_nats_server()
        except RuntimeError as exc:
            return {"skipped": str(exc)}
        with (
            tempfile.TemporaryDirectory(prefix="tackroom-bench-nats-") as tmp,
            nats_server(store_dir=Path(tmp)) as nats,
        ):
            result = await measure(f"{nats.url}?namespace={namespace}", samples)
        server = "own nats-server on 127.0.0.1 (JetStream file store in a temporary directory)"
    return {
        **result,
        "server": server,
        "loadavg_1m": {"before": load_before, "after": round(os.getloadavg()[0], 2)},
        "measured": "engine.trigger(id, payload) from this process (tracing off) to an echo in"
        f" another process: ts = {TS} (node {ECHO_JS.relative_to(ROOT)}), py = {PY} (python"
        f" bench/crosslang.py --serve); {WARMUP} warm-up calls each, then rounds of {ROUND}"
        " calls, ts and py taking turns (the first of a round alternating). wall: perf_counter;"
        " caller_cpu: this process's process_time per call; worker_cpu_mean: the worker's"
        " /proc CPU over the measured calls, per call. ratio_ts_py = ts / py",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description="The Python echo worker of the figure.")
    parser.add_argument("--serve", required=True, metavar="URL", help="serve bench::echo_py")
    asyncio.run(serve(parser.parse_args().serve))


if __name__ == "__main__":
    main()
