from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tackroom.testing.nats import free_port

from .servers import HttpServer


@pytest.fixture
async def http_everything() -> AsyncIterator[HttpServer]:
    server = HttpServer(free_port())
    await server.start()
    try:
        yield server
    finally:
        await server.kill()
