"""The hooks contract suite against the ``hooks`` worker this package ships."""

from __future__ import annotations

from tackroom.testing.contracts import HooksContract


class TestHooksWorker(HooksContract):
    worker_name = "hooks"
