"""The engine backends that backend-parametrized suites run on (engine conformance, the turn
suite, the worker contract suites of :mod:`tackroom.testing.contracts`).

Adding a backend is one line in :data:`BACKENDS`: its name and how to build a fresh engine URL
for one test from a directory of that test's own (its ``tmp_path``).

Importing this module needs no optional extra: the ``nats`` backend imports the NATS client (the
``nats`` extra) and finds a ``nats-server`` (see :mod:`tackroom.testing.nats`) only when a test
asks for its URL.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

__all__ = ["BACKENDS", "engine_url_for"]


def _embedded_url(tmp_path: Path) -> str:
    return f"embedded:{tmp_path / 'engine.db'}"


def _nats_url(tmp_path: Path) -> str:
    from tackroom.testing.nats import nats_test_url

    return nats_test_url(tmp_path)


BACKENDS: dict[str, Callable[[Path], str]] = {
    "embedded": _embedded_url,
    "nats": _nats_url,
}
"""Backend name → engine URL for one test, from its ``tmp_path``.

Each URL must name an engine of that test's own (a fresh file, or a fresh namespace on the
server shared by the test process): tests reuse queue, scope and stream names freely. Child
processes given the URL open the same engine.
"""


def engine_url_for(backend: str, tmp_path: Path) -> str:
    return BACKENDS[backend](tmp_path)
