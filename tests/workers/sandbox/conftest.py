from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from tackroom.engine import Engine, InvocationError, open_engine
from tackroom.runtime import HarnessConfig, Host
from tackroom.testing.engines import MEMORY_URL
from tackroom.workers.sandbox.worker import WORKER

requires_bwrap = pytest.mark.skipif(
    shutil.which("bwrap") is None,
    reason="bubblewrap is not installed (apt-get install bubblewrap; make setup installs it)",
)


@asynccontextmanager
async def sandbox_bus(root: Path, **config: Any) -> AsyncIterator[Engine]:
    """An engine serving the sandbox worker alone, its workspaces under ``root``."""
    harness = HarnessConfig(
        schema_version=1,
        worker_config={"sandbox": {"workspace_root": str(root), **config}},
    )
    async with Host(engine=open_engine(MEMORY_URL), workers=[WORKER], config=harness) as host:
        yield host.engine


async def run(bus: Engine, argv: list[str], *, session: str = "s1", **fields: Any) -> Any:
    return await bus.trigger(
        "sandbox::run", {"session_id": session, "argv": argv, **fields}, timeout=60
    )


async def sh(bus: Engine, command: str, **fields: Any) -> Any:
    return await run(bus, ["/bin/sh", "-c", command], **fields)


async def refused(bus: Engine, payload: dict[str, Any], code: str) -> str:
    with pytest.raises(InvocationError) as caught:
        await bus.trigger("sandbox::run", {"session_id": "s1", **payload}, timeout=60)
    assert caught.value.remote_code == code, caught.value
    return caught.value.message


def processes_with(marker: str) -> list[int]:
    """Host processes whose command line contains ``marker`` (this test's own excepted)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline:
            found.append(int(entry))
    return found


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "workspaces"
