"""The sessions contract suite against the ``sessions`` worker this package ships."""

from __future__ import annotations

from tackroom.testing.contracts import SessionsContract


class TestSessionsWorker(SessionsContract):
    worker_name = "sessions"
