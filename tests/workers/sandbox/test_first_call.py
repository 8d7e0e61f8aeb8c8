"""The sandbox is found and probed by the first call, not at boot: a run that never runs a
command pays nothing for it. Once — concurrent first calls share the probe — and its outcome is
kept, a refusal too, so every call is refused with the same reason."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from tackroom.contracts.sandbox import SANDBOX_UNAVAILABLE, RunRequest
from tackroom.engine.errors import FunctionError
from tackroom.workers.sandbox.config import SandboxConfig
from tackroom.workers.sandbox.sandbox import Sandbox, _Setup

from .conftest import requires_bwrap

BOOT = """
import asyncio, sys
from tackroom.engine import open_engine
from tackroom.runtime import HarnessConfig, Host
from tackroom.runtime.registry import load_worker

async def main():
    workers = [load_worker(name) for name in ("engine", "sandbox", "shell")]
    config = HarnessConfig.defaults().model_copy(
        update={"worker_config": {"sandbox": {"workspace_root": sys.argv[1]}}}
    )
    async with Host(engine=open_engine("embedded::memory:"), workers=workers, config=config):
        print("tackroom.workers.sandbox.sandbox" in sys.modules)

asyncio.run(main())
"""


class CountingSandbox(Sandbox):
    """A sandbox that counts how often it looks at the host (find + probe)."""

    finds = 0

    async def _find(self) -> _Setup:
        self.finds += 1
        return await super()._find()


def test_booting_the_workers_neither_finds_nor_probes(tmp_path: Path) -> None:
    booted = subprocess.run(
        [sys.executable, "-c", BOOT, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert booted.returncode == 0, booted.stderr
    assert booted.stdout.strip() == "False"  # the module that finds and probes was not imported


@requires_bwrap
async def test_concurrent_first_calls_share_one_probe(root: Path) -> None:
    (root / "s1").mkdir(parents=True)
    sandbox = CountingSandbox(SandboxConfig(workspace_root=root))
    with pytest.raises(RuntimeError, match="not ready"):
        sandbox.status()
    request = RunRequest(session_id="s1", argv=["true"])
    results = await asyncio.gather(*(sandbox.run(request) for _ in range(4)))
    assert [r.exit_code for r in results] == [0, 0, 0, 0]
    assert sandbox.finds == 1
    assert sandbox.status().available is True


async def test_a_failed_probe_is_kept_and_every_call_gets_its_reason(root: Path) -> None:
    """``/bin/false`` stands in for a bwrap that cannot create a sandbox here."""
    (root / "s1").mkdir(parents=True)
    sandbox = CountingSandbox(SandboxConfig(workspace_root=root, bwrap="/bin/false"))
    reasons = set()
    for _ in range(3):
        with pytest.raises(FunctionError) as caught:
            await sandbox.run(RunRequest(session_id="s1", argv=["touch", "ran"]))
        assert caught.value.code == SANDBOX_UNAVAILABLE
        reasons.add(str(caught.value))
    status = sandbox.status()
    assert status.available is False
    assert reasons == {status.reason}
    assert sandbox.finds == 1
    assert not (root / "s1" / "ran").exists()


async def test_a_first_caller_cancelled_midway_leaves_nothing_kept(root: Path) -> None:
    sandbox = CountingSandbox(SandboxConfig(workspace_root=root, bwrap="/bin/false"))
    first = asyncio.create_task(sandbox.ready())
    await asyncio.sleep(0)  # it holds the lock and is finding
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    await sandbox.ready()
    assert sandbox.finds == 2
    assert sandbox.status().available is False
