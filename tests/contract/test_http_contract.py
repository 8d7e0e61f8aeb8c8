"""The http contract suite against the ``http`` worker this package ships."""

from __future__ import annotations

from tackroom.testing.contracts import HttpContract


class TestHttpWorker(HttpContract):
    worker_name = "http"
