"""Fixtures of the engine conformance suite: every test runs once per backend.

Adding a backend is one line in :data:`BACKENDS`: its name and how to build a fresh engine URL
for one test from that test's ``tmp_path``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from tackroom.engine import Engine
from tackroom.testing import SpanRecorder, running_engine
from tackroom.testing.nats import nats_test_url

BACKENDS: dict[str, Callable[[Path], str]] = {
    "embedded": lambda tmp_path: f"embedded:{tmp_path / 'engine.db'}",
    "nats": nats_test_url,
}
"""Backend name → engine URL for one test, from its ``tmp_path``.

Each URL must name an engine of that test's own (a fresh file, or a fresh namespace on a shared
server): tests reuse queue, scope and stream names freely.
"""


def engine_url_for(backend: str, tmp_path: Path) -> str:
    return BACKENDS[backend](tmp_path)


@pytest.fixture(params=list(BACKENDS))
def backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture
def engine_url(backend: str, tmp_path: Path) -> str:
    return engine_url_for(backend, tmp_path)


@pytest.fixture
async def engine(engine_url: str) -> AsyncIterator[Engine]:
    """A started engine without tracing, closed after the test."""
    async with running_engine(engine_url) as started:
        yield started


@pytest.fixture
def span_recorder() -> Iterator[SpanRecorder]:
    recorder = SpanRecorder()
    yield recorder
    recorder.shutdown()


@pytest.fixture
async def traced_engine(engine_url: str, span_recorder: SpanRecorder) -> AsyncIterator[Engine]:
    """A started engine whose spans go to ``span_recorder``."""
    async with running_engine(engine_url, tracer_provider=span_recorder.provider) as started:
        yield started
