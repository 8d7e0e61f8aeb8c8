"""The compactor contract suite against the shipped ``compactor`` worker."""

from __future__ import annotations

from tackroom.testing.contracts import CompactorContract


class TestCompactorWorker(CompactorContract):
    worker_name = "compactor"
