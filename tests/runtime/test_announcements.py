"""Every worker announces its name, version and the contract versions it serves, on both
backends, and ``tackroom workers`` lists them."""

from __future__ import annotations

import asyncio
import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tackroom._version import __version__
from tackroom.contracts.utilities import CALC_ADD
from tackroom.engine.factory import open_engine
from tackroom.runtime.host import Host
from tackroom.runtime.registry import load_worker
from tackroom.runtime.worker import WorkerConfig, WorkerContext, WorkerSpec, version_of
from tackroom.testing.backends import engine_url_for

ROOT = Path(__file__).resolve().parents[2]


async def _plain(ctx: WorkerContext[WorkerConfig]) -> None:
    async def echo(payload: object) -> object:
        return payload

    await ctx.register_function("test::echo", echo)


PLAIN = WorkerSpec(
    name="plain", description="", config_model=WorkerConfig, start=_plain, version="9.9.9"
)


@pytest.mark.parametrize("backend", ["embedded", "nats"])
async def test_workers_announce_their_version_and_contracts(backend: str, tmp_path: Path) -> None:
    engine = open_engine(engine_url_for(backend, tmp_path))
    async with Host(engine=engine, workers=[load_worker("utilities"), PLAIN]):
        workers = {w.name: w for w in await engine.list_workers()}
        functions = {f.function_id: f for f in await engine.list_functions()}
    assert workers["utilities"].version == __version__
    assert workers["utilities"].contracts["calc::add"] == CALC_ADD.contract_version == 1
    assert workers["plain"].version == "9.9.9"
    assert workers["plain"].contracts == {}  # registered without a contract descriptor
    assert functions["calc::add"].contract_version == 1
    assert functions["test::echo"].contract_version is None
    assert functions["test::echo"].version == "9.9.9"


def test_a_builtin_announces_tackroom_s_version_without_package_metadata() -> None:
    assert version_of(load_worker("utilities")) == __version__
    assert version_of(PLAIN) == "9.9.9"


async def test_tackroom_workers_lists_the_live_bus(tmp_path: Path) -> None:
    url = engine_url_for("nats", tmp_path)
    engine = open_engine(url)
    async with Host(engine=engine, workers=[load_worker("utilities"), PLAIN]):
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
        command = [sys.executable, "-m", "tackroom.cli.main", "workers", "--engine", url]
        run = functools.partial(subprocess.run, capture_output=True, text=True, env=env)
        shown = await asyncio.to_thread(run, command, timeout=60)
        raw = await asyncio.to_thread(run, [*command, "--json"], timeout=60)
    assert shown.returncode == 0, shown.stderr
    header, *rows = shown.stdout.splitlines()
    assert header.split() == ["WORKER", "VERSION", "HOST", "PID", "FUNCTIONS"]
    plain = next(row for row in rows if row.startswith("plain "))
    assert plain.split()[1] == "9.9.9"
    assert str(os.getpid()) in plain.split()
    assert "test::echo" in plain
    listed = {w["name"]: w for w in json.loads(raw.stdout)["workers"]}
    assert listed["utilities"]["contracts"]["calc::add"] == 1
