"""The trace store contract suite against the ``traces`` worker this package ships."""

from __future__ import annotations

from tackroom.testing.contracts import TracesContract


class TestTracesWorker(TracesContract):
    worker_name = "traces"
