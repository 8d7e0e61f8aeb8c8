"""The orchestrator contract suite against the shipped ``orchestrator`` worker."""

from __future__ import annotations

from tackroom.testing.contracts.orchestrator import OrchestratorContract


class TestOrchestratorWorker(OrchestratorContract):
    worker_name = "orchestrator"
