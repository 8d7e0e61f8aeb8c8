"""Fixtures of the engine conformance suite: every test runs once per backend.

The backends and their URLs are :data:`tackroom.testing.backends.BACKENDS` (shared with the
turn suite and the worker contract suites).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tackroom.engine import Engine
from tackroom.testing import SpanRecorder, running_engine
from tackroom.testing.backends import BACKENDS, engine_url_for


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


@pytest.fixture(params=["same_engine", "other_engine"])
async def peer(
    request: pytest.FixtureRequest, engine: Engine, backend: str, engine_url: str
) -> AsyncIterator[Engine]:
    """Where a test's callers and channel writers live: the engine under test, or a second
    engine on the same server (NATS only: an embedded engine's functions and channels are its
    own). NATS serves a caller in the serving process without the server; the second engine
    keeps the path through the server under the same tests."""
    if request.param == "same_engine":
        yield engine
        return
    if backend != "nats":
        pytest.skip("only NATS engines reach another engine's functions and channels")
    async with running_engine(engine_url) as other:
        yield other


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
