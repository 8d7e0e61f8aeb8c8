"""The engine backends that backend-parametrized suites run on (conformance, turn reliability).

Adding a backend is one line in :data:`BACKENDS`: its name and how to build a fresh engine URL
for one test from a directory of that test's own (its ``tmp_path``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tackroom.testing.nats import nats_test_url

__all__ = ["BACKENDS", "engine_url_for"]

BACKENDS: dict[str, Callable[[Path], str]] = {
    "embedded": lambda tmp_path: f"embedded:{tmp_path / 'engine.db'}",
    "nats": nats_test_url,
}
"""Backend name → engine URL for one test, from its ``tmp_path``.

Each URL must name an engine of that test's own (a fresh file, or a fresh namespace on the
server shared by the test process): tests reuse queue, scope and stream names freely. Child
processes given the URL open the same engine.
"""


def engine_url_for(backend: str, tmp_path: Path) -> str:
    return BACKENDS[backend](tmp_path)
