"""The base of every contract suite: each test once per engine backend, a bus serving the worker
under test, and helpers.

A suite subclasses :class:`WorkerContract` and writes its tests against function ids only. A
replacement worker proves it fits by subclassing the suite with its own ``worker_name`` (or
``worker``, its ``WorkerSpec``). Every test runs once per backend of
:data:`tackroom.testing.backends.BACKENDS` (``embedded``, ``nats``); a subclass narrows that with
:attr:`OnEveryBackend.backends`.

A worker in another process or language sets :attr:`WorkerContract.worker_command` instead: each
test starts that command on a NATS engine of its own (see :mod:`.external`), so the same tests
run against it unchanged.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import pytest

from tackroom.engine.errors import InvocationError
from tackroom.engine.factory import open_engine
from tackroom.engine.protocol import Engine
from tackroom.runtime.config import HarnessConfig
from tackroom.runtime.host import Host
from tackroom.runtime.registry import load_worker
from tackroom.runtime.worker import WorkerSpec
from tackroom.testing.backends import BACKENDS, engine_url_for
from tackroom.testing.contracts.external import external_worker

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

__all__ = ["CONTRACT_TIMEOUT", "OnEveryBackend", "WorkerContract"]

CONTRACT_TIMEOUT = 10.0


class OnEveryBackend:
    """Runs every test that uses ``engine_url`` once per name in :attr:`backends`."""

    backends: ClassVar[tuple[str, ...]] = tuple(BACKENDS)
    """The backends to run on; e.g. ``backends = ("embedded",)`` where no NATS server is at hand
    (the ``nats`` backend needs the ``nats`` extra and a ``nats-server``: see
    :mod:`tackroom.testing.nats`)."""

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        if "backend" in metafunc.fixturenames:
            unknown = sorted(set(self.backends) - set(BACKENDS))
            if unknown:
                raise ValueError(f"unknown backends {unknown}: known are {sorted(BACKENDS)}")
            metafunc.parametrize("backend", self.backends)

    @pytest.fixture
    def engine_url(self, backend: str, tmp_path: Path) -> str:
        """A fresh engine of this test's own on ``backend``."""
        return engine_url_for(backend, tmp_path)


class WorkerContract(OnEveryBackend):
    worker_name: ClassVar[str]
    """The worker under test as :func:`~tackroom.runtime.load_worker` finds it: a built-in name or
    a ``tackroom.workers`` entry point of an installed package."""
    worker: ClassVar[WorkerSpec[Any] | None] = None
    """Or the worker itself (its module's ``WorkerSpec``), which needs no entry point; it wins
    over :attr:`worker_name`."""

    worker_command: ClassVar[Sequence[str] | None] = None
    """Or a command that runs the worker in a process of its own, in any language: each test
    starts it with ``TACKROOM_ENGINE`` (the test's NATS engine URL) and ``TACKROOM_WORKER_CONFIG``
    (its config section, JSON) in the environment, waits for a stdout line holding the word
    ``ready``, and stops it with SIGTERM afterwards. It wins over :attr:`worker` and
    :attr:`worker_name`; the tests run on NATS only (``backends = ("nats",)``)."""

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        if self.worker_command is not None and "nats" not in self.backends:
            raise ValueError("a worker_command joins the bus over NATS: keep 'nats' in backends")
        if self.worker_command is not None and "backend" in metafunc.fixturenames:
            metafunc.parametrize("backend", ["nats"])
            return
        super().pytest_generate_tests(metafunc)

    def worker_spec(self) -> WorkerSpec[Any]:
        return self.worker if self.worker is not None else load_worker(self.worker_name)

    @asynccontextmanager
    async def hosted(
        self,
        engine_url: str,
        config: dict[str, Any] | None = None,
        *,
        tracer_provider: TracerProvider | None = None,
        beside: Sequence[WorkerSpec[Any] | str] = (),
        beside_config: Mapping[str, Any] | None = None,
    ) -> AsyncIterator[Engine]:
        """A started engine at ``engine_url`` serving the worker under test with ``config`` as
        its config section, and the workers ``beside`` it (collaborators a suite needs, each
        with its section in ``beside_config``) in this process."""
        sections = dict(beside_config or {})
        under_test: list[WorkerSpec[Any] | str] = []
        if self.worker_command is None:
            spec = self.worker_spec()
            under_test.append(spec)
            if config is not None:
                sections[spec.name] = config
        harness = HarnessConfig.defaults()
        if sections:
            harness = harness.model_copy(update={"worker_config": sections})
        engine = open_engine(engine_url, tracer_provider=tracer_provider)
        specs = [w if isinstance(w, WorkerSpec) else load_worker(w) for w in [*under_test, *beside]]
        async with Host(engine=engine, workers=specs, config=harness) as host:
            if self.worker_command is None:
                yield host.engine
                return
            async with external_worker(
                self.worker_command, engine_url=engine_url, config=config or {}
            ):
                yield host.engine

    @pytest.fixture
    async def bus(self, engine_url: str) -> AsyncIterator[Engine]:
        """An engine serving the worker under test (and nothing else)."""
        async with self.hosted(engine_url) as engine:
            yield engine

    @staticmethod
    async def call(bus: Engine, function_id: str, payload: Any) -> Any:
        return await bus.trigger(function_id, payload, timeout=CONTRACT_TIMEOUT)

    @staticmethod
    async def failure(bus: Engine, function_id: str, payload: Any) -> InvocationError:
        """The typed error a call must fail with."""
        with pytest.raises(InvocationError) as caught:
            await bus.trigger(function_id, payload, timeout=CONTRACT_TIMEOUT)
        return caught.value

    @classmethod
    async def code_of(cls, bus: Engine, function_id: str, payload: Any) -> str:
        return (await cls.failure(bus, function_id, payload)).remote_code
