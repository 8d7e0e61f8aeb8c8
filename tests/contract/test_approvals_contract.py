"""The approvals contract suite against the ``approvals`` worker this package ships."""

from __future__ import annotations

from tackroom.testing.contracts import ApprovalsContract


class TestApprovalsWorker(ApprovalsContract):
    worker_name = "approvals"
