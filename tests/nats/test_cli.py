"""``tackroom serve --engine nats://…`` and ``tackroom worker run NAME --engine nats://…``."""

from __future__ import annotations

import asyncio
import json
import re
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from tackroom import Harness
from tackroom.contracts.messages import FunctionResultMessage, text_of
from tackroom.engine import Engine
from tackroom.testing import running_engine, wait_until
from tackroom.testing.cli import run_tackroom, tackroom_argv

STARTUP = 30.0


@asynccontextmanager
async def tackroom(*args: str, cwd: Path) -> AsyncIterator[asyncio.subprocess.Process]:
    """Run ``tackroom ARGS`` until it prints its ready line; SIGTERM it on the way out."""
    proc = await asyncio.create_subprocess_exec(
        *tackroom_argv(*args),
        cwd=cwd,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), STARTUP)).decode()
        assert line == "tackroom ready workers=engine\n", f"unexpected ready line {line!r}"
        yield proc
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), STARTUP)
            except TimeoutError:
                proc.kill()
                await proc.wait()


async def test_serve_on_nats_answers_another_process(tmp_path: Path, nats_url: str) -> None:
    (tmp_path / "tackroom.yaml").write_text("schema_version: 1\nworkers: [engine]\n")

    async with (
        tackroom("serve", "--engine", nats_url, cwd=tmp_path) as serve,
        running_engine(nats_url) as engine,
    ):
        written = await engine.trigger(
            "state::set", {"scope": "s", "key": "k", "value": {"hello": "nats"}}, timeout=10
        )
        answer = await engine.trigger("state::get", {"scope": "s", "key": "k"}, timeout=10)
        assert answer == {"value": {"hello": "nats"}, "revision": written["revision"]}
        catalog = await engine.trigger("engine::functions::list", None, timeout=10)
        assert "state::get" in {f["function_id"] for f in catalog["functions"]}
        workers = await engine.list_workers()
        assert [w.pid for w in workers if w.name == "engine"] == [serve.pid]

        called = await run_tackroom(
            "call", "state::get", '{"scope": "s", "key": "k"}', "--engine", nats_url, cwd=tmp_path
        )
        assert called.code == 0, called.stderr
        assert json.loads(called.stdout) == answer
        listed = await run_tackroom("functions", "--engine", nats_url, cwd=tmp_path)
        assert re.search(r"^state::get\s+engine\s+Read a state value", listed.stdout, re.M)

        serve.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(serve.wait(), STARTUP) == 0


async def test_worker_run_joins_a_shared_nats_engine(tmp_path: Path, nats_url: str) -> None:
    (tmp_path / "tackroom.yaml").write_text("schema_version: 1\nworkers: [engine]\n")

    async with running_engine(nats_url) as engine:
        await engine.set_state("shared", "k", 7)
        async with tackroom("worker", "run", "engine", "--engine", nats_url, cwd=tmp_path) as run:
            answer = await engine.trigger("state::get", {"scope": "shared", "key": "k"}, timeout=10)
            assert answer is not None
            assert answer["value"] == 7
            run.send_signal(signal.SIGTERM)
            assert await asyncio.wait_for(run.wait(), STARTUP) == 0

        # A clean stop removes the worker from the catalog at once.
        await wait_until(lambda: _no_engine_worker(engine), timeout=5)


async def _no_engine_worker(engine: Engine) -> bool:
    return all(w.name != "engine" for w in await engine.list_workers())


async def test_a_harness_attached_on_nats_serves_its_tools_to_a_serve(
    tmp_path: Path, nats_url: str
) -> None:
    script = [
        {"tool_calls": [{"name": "shout", "arguments": {"text": "hi"}}]},
        {"text": "It said HI."},
    ]
    (tmp_path / "tackroom.yaml").write_text(
        "schema_version: 1\nagent:\n  model: scripted:demo\nworker_config:\n  scripted:\n"
        f"    script: {json.dumps(script)}\n    per_session: true\n"
    )
    proc = await asyncio.create_subprocess_exec(
        *tackroom_argv("serve", "--engine", nats_url), cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    ran_here: list[str] = []

    def shout(text: str) -> str:
        """Upper-case a text."""
        ran_here.append(text)
        return text.upper()

    try:
        assert proc.stdout is not None
        ready = (await asyncio.wait_for(proc.stdout.readline(), STARTUP)).decode()
        assert "orchestrator" in ready, ready
        harness = Harness(
            "scripted:demo", engine=nats_url, attach=True, tools=[shout], home=tmp_path / "h"
        )
        async with harness:
            result = await harness.run("shout hi")
    finally:
        proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(proc.wait(), STARTUP)
    assert result.output == "It said HI."
    assert ran_here == ["hi"]  # the serve's orchestrator called the tool in this process
    (tool_result,) = [m for m in result.messages if isinstance(m, FunctionResultMessage)]
    assert text_of(tool_result.content) == "HI"
