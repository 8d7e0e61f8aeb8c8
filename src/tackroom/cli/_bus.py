"""``bus(config, workers)``: how a command reaches the workers of a harness.

- Embedded engine, nobody holds it: the workers run in this process for the command's duration.
- Embedded engine held by a ``tackroom serve``: its local endpoint (a Unix socket).
- A shared engine (NATS): with ``shared_bus_workers=()`` nothing is booted here and the call
  goes over the bus to the harness's own worker processes; by default the same workers are
  booted in this process, as replicas.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

from tackroom.engine.errors import EngineLocked
from tackroom.engine.protocol import Caller
from tackroom.runtime.client import LocalClient
from tackroom.runtime.config import HarnessConfig
from tackroom.runtime.host import Host

__all__ = ["Caller", "bus"]


@asynccontextmanager
async def bus(
    config: HarnessConfig,
    workers: Sequence[str] = ("engine", "sessions"),
    *,
    shared_bus_workers: Sequence[str] | None = None,
    read_only: bool = False,
) -> AsyncIterator[Caller]:
    """A way to trigger ``workers``' functions: in-process, a running serve's endpoint, or the bus.

    ``shared_bus_workers``: what to boot on a non-embedded engine (default: ``workers``).
    ``read_only``: the command only reads, so an embedded engine is opened read-only (it works
    in a read-only ``.tackroom/`` and creates nothing).
    """
    embedded = config.engine.startswith("embedded:")
    boot = list(workers if embedded or shared_bus_workers is None else shared_bus_workers)
    host = Host.from_config(config, workers=boot, read_only=read_only)
    try:
        await host.start()
    except EngineLocked:
        async with LocalClient(
            config.endpoint.socket, max_frame_bytes=config.endpoint.max_frame_bytes
        ) as client:
            yield client
        return
    try:
        yield host.engine
    finally:
        await host.close()
