"""The agents contract suite against the ``agents`` worker this package ships."""

from __future__ import annotations

from tackroom.testing.contracts.agents import AgentsContract


class TestAgentsWorker(AgentsContract):
    worker_name = "agents"
