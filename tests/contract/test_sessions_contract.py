"""The sessions contract suite against the ``sessions`` worker this package ships."""

from __future__ import annotations

from tests.contract.sessions_suite import SessionsContract


class TestSessionsWorker(SessionsContract):
    worker_name = "sessions"
