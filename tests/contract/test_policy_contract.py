"""The policy contract suite against the ``policy`` worker (YAML rules)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tackroom.testing.contracts import PolicyContract

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
