from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tackroom.testing.backends import BACKENDS, engine_url_for

from .served import WRITE_THEN_ANSWER, Served, gateway_config, serving


@pytest.fixture(params=list(BACKENDS))
def backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture
def engine_url(backend: str, tmp_path: Path) -> str:
    return engine_url_for(backend, tmp_path)


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    """On the embedded engine (most route tests need only one backend)."""
    config = gateway_config(
        tmp_path, f"embedded:{tmp_path / 'engine.db'}", script=WRITE_THEN_ANSWER
    )
    async with serving(config) as running:
        yield running
