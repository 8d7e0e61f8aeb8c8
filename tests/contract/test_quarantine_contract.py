"""The quarantined reader's contract suite against the shipped ``quarantine`` worker."""

from __future__ import annotations

from tackroom.testing.contracts import QuarantineContract


class TestQuarantineWorker(QuarantineContract):
    worker_name = "quarantine"
