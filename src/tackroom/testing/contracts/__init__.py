"""Worker contract suites: the tests a worker must pass to replace a shipped one.

Each suite is a class of pytest tests written against function ids only. A replacement worker
proves it fits by subclassing the suite in a ``test_*.py`` module and naming itself::

    from tackroom.testing.contracts import SessionsContract

    class TestMySessions(SessionsContract):
        worker_name = "my-sessions"

Every test runs once per engine backend (``embedded``, ``nats``). The suites need pytest and
pytest-asyncio in ``asyncio_mode = "auto"`` (``pip install 'tackroom[testing]'``; on NATS also
``tackroom[nats]`` and a ``nats-server``); importing :mod:`tackroom.testing` does not import them,
only this package does. See ``docs/contracts.md``.
"""

from __future__ import annotations

from tackroom.extras import import_extra

import_extra("pytest", needed_by="the contract suites (tackroom.testing.contracts)")
import pytest  # noqa: E402

_SUITES = (
    "access base approvers approvals budget catalog compactor credentials directory hooks http"
    " memory policy policy_flow provider quarantine sandbox sessions tools traces files shell mcp"
    " agents audit tasks orchestra orchestrator gateway"
)
# Before the suites are imported: their plain asserts get pytest's explanations.
pytest.register_assert_rewrite(*(f"{__name__}.{suite}" for suite in _SUITES.split()))

from tackroom.testing.contracts.access import AccessContract  # noqa: E402
from tackroom.testing.contracts.agents import AgentsContract  # noqa: E402
from tackroom.testing.contracts.approvals import ApprovalsContract  # noqa: E402
from tackroom.testing.contracts.audit import AuditContract  # noqa: E402
from tackroom.testing.contracts.base import (  # noqa: E402
    CONTRACT_TIMEOUT,
    OnEveryBackend,
    WorkerContract,
)
from tackroom.testing.contracts.budget import BudgetContract  # noqa: E402
from tackroom.testing.contracts.catalog import CatalogContract  # noqa: E402
from tackroom.testing.contracts.compactor import CompactorContract  # noqa: E402
from tackroom.testing.contracts.credentials import CredentialsContract  # noqa: E402
from tackroom.testing.contracts.directory import DirectoryContract  # noqa: E402
from tackroom.testing.contracts.files import FilesContract  # noqa: E402
from tackroom.testing.contracts.gateway import GatewayApiContract, GatewaySubject  # noqa: E402
from tackroom.testing.contracts.hooks import HooksContract  # noqa: E402
from tackroom.testing.contracts.http import HttpContract  # noqa: E402
from tackroom.testing.contracts.mcp import TIME_PROBE, McpContract, McpProbe  # noqa: E402
from tackroom.testing.contracts.memory import MemoryContract  # noqa: E402
from tackroom.testing.contracts.orchestrator import OrchestratorContract  # noqa: E402
from tackroom.testing.contracts.policy import PolicyContract  # noqa: E402
from tackroom.testing.contracts.policy_flow import PolicyFlowContract  # noqa: E402
from tackroom.testing.contracts.provider import ProviderContract, ProviderSubject  # noqa: E402
from tackroom.testing.contracts.quarantine import QuarantineContract  # noqa: E402
from tackroom.testing.contracts.sandbox import SandboxContract  # noqa: E402
from tackroom.testing.contracts.sessions import SessionsContract  # noqa: E402
from tackroom.testing.contracts.shell import ShellContract  # noqa: E402
from tackroom.testing.contracts.tasks import TasksContract  # noqa: E402
from tackroom.testing.contracts.tools import ToolContract  # noqa: E402
from tackroom.testing.contracts.traces import TracesContract  # noqa: E402

__all__ = [
    "CONTRACT_TIMEOUT",
    "TIME_PROBE",
    "AccessContract",
    "AgentsContract",
    "ApprovalsContract",
    "AuditContract",
    "BudgetContract",
    "CatalogContract",
    "CompactorContract",
    "CredentialsContract",
    "DirectoryContract",
    "FilesContract",
    "GatewayApiContract",
    "GatewaySubject",
    "HooksContract",
    "HttpContract",
    "McpContract",
    "McpProbe",
    "MemoryContract",
    "OnEveryBackend",
    "OrchestratorContract",
    "PolicyContract",
    "PolicyFlowContract",
    "ProviderContract",
    "ProviderSubject",
    "QuarantineContract",
    "SandboxContract",
    "SessionsContract",
    "ShellContract",
    "TasksContract",
    "ToolContract",
    "TracesContract",
    "WorkerContract",
]
