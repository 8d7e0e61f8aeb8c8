"""The policy contract suite against the ``policy-cedar`` worker (Cedar policies)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tackroom.testing.contracts import PolicyContract

POLICIES = """\
@id("unlock")
permit (principal, action, resource)
when {
  resource in Namespace::"approval" || resource in Namespace::"policy" ||
  resource in Namespace::"auth" || resource in Namespace::"budget" ||
  resource in Namespace::"state" || resource in Namespace::"engine" ||
  resource in Namespace::"run" || resource in Namespace::"turn"
};

@id("read-files")
permit (principal, action == Action::"call", resource)
when { resource == Function::"fs::read" || resource == Function::"fs::list" };

@id("git-read")
permit (principal, action == Action::"call", resource == Function::"shell::exec")
when {
  context.args has command &&
  ["git status", "git log", "git diff"].contains(context.args.command)
};

@id("no-shell")
@reason("shell is off")
forbid (principal, action, resource in Namespace::"shell")
unless {
  resource == Function::"shell::exec" &&
  context.args has command &&
  ["git status", "git log", "git diff"].contains(context.args.command)
};

@id("write-notes")
permit (principal, action == Action::"call_with_approval", resource == Function::"fs::write")
when {
  context.args has path &&
  context.args.path like "notes/*" &&
  !(context.args.path like "*..*")
};

@id("no-writes")
forbid (principal, action == Action::"call", resource == Function::"fs::write");
"""


class TestCedarPolicyWorker(PolicyContract):
    worker_name = "policy-cedar"

    def configure(self, directory: Path) -> dict[str, Any]:
        path = directory / "policies.cedar"
        path.write_text(POLICIES, encoding="utf-8")
        return {"policies_path": str(path), "default_decision": "needs_approval"}
