"""The policy contract suites against the ``policy`` worker (YAML rules): tool calls
(``policy::check_permissions``), their flow rules, and resource access (``policy::authorize``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tackroom.testing.contracts import AccessContract, PolicyContract, PolicyFlowContract

RULES = """\
schema_version: 1
rules:
  - id: unlock
    function: [approval::*, policy::*, auth::*, budget::*, state::*, engine::*, run::*, turn::*]
    decision: allow
  - id: read-files
    function: [fs::read, fs::list]
    decision: allow
  - id: git-read
    function: shell::exec
    decision: allow
    args:
      command: {matches: "git (status|log|diff)"}
  - id: no-shell
    function: shell::*
    decision: deny
    reason: shell is off
  - id: write-notes
    function: fs::write
    decision: needs_approval
    args:
      path: {under: notes}
  - id: no-writes
    function: fs::write
    decision: deny
"""


class TestPolicyWorker(PolicyContract):
    worker_name = "policy"

    def configure(self, directory: Path) -> dict[str, Any]:
        path = directory / "permissions.yaml"
        path.write_text(RULES, encoding="utf-8")
        return {"rules_path": str(path), "default_decision": "needs_approval"}


ALLOW_ALL = """\
schema_version: 1
rules:
  - id: allow-all
    function: "*"
    decision: allow
"""


class TestPolicyWorkerFlow(PolicyFlowContract):
    worker_name = "policy"

    def configure(self, directory: Path) -> dict[str, Any]:
        path = directory / "permissions.yaml"
        path.write_text(ALLOW_ALL, encoding="utf-8")
        return {"rules_path": str(path), "reload_interval": 0}


ACCESS = """\
schema_version: 1
rules: []
access:
  - id: staff
    roles: [staff]
    actions: [read, stream, run]
    resources: [session, trace]
    decision: allow
  - id: auditors
    roles: [auditor]
    actions: [read]
    decision: allow
  - id: catalog
    roles: "*"
    actions: [read]
    resources: [catalog]
    decision: allow
  - id: frozen
    roles: [frozen]
    actions: "*"
    decision: deny
    reason: account frozen
  - id: no-interns-on-budgets
    roles: [intern]
    actions: [read]
    resources: [budget]
    decision: deny
"""


class TestPolicyWorkerAccess(AccessContract):
    worker_name = "policy"

    def configure_shipped(self, directory: Path) -> dict[str, Any]:
        # A file without an access: section: the built-in access rules apply.
        path = directory / "shipped.yaml"
        path.write_text(RULES, encoding="utf-8")
        return {"rules_path": str(path), "reload_interval": 0}

    def configure(self, directory: Path) -> dict[str, Any]:
        path = directory / "access.yaml"
        path.write_text(ACCESS, encoding="utf-8")
        return {"rules_path": str(path), "reload_interval": 0}

    def break_access(self, directory: Path) -> int:
        bad = ACCESS.replace("actions: [read, stream, run]", "actions: [read, stream, runn]")
        (directory / "access.yaml").write_text(bad, encoding="utf-8")
        return 6
