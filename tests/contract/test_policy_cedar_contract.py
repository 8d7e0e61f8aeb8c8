"""The policy contract suites against the ``policy-cedar`` worker (Cedar policies): tool calls
(``policy::check_permissions``), their flow rules, and resource access (``policy::authorize``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tackroom.testing.contracts import AccessContract, PolicyContract, PolicyFlowContract
from tackroom.workers.policy_cedar.worker import builtin_access_text, builtin_text

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


ALLOW_ALL = """\
@id("allow-all")
permit (principal, action == Action::"call", resource);
"""


class TestCedarPolicyWorkerFlow(PolicyFlowContract):
    worker_name = "policy-cedar"

    def configure(self, directory: Path) -> dict[str, Any]:
        path = directory / "policies.cedar"
        path.write_text(ALLOW_ALL, encoding="utf-8")
        return {"policies_path": str(path), "reload_interval": 0, "validate_schema": True}


ACCESS = """\
@id("staff")
permit (
  principal in Role::"staff",
  action in [Action::"read", Action::"stream", Action::"run"],
  resource
)
when { resource is Session || resource is Trace };

@id("auditors")
permit (principal in Role::"auditor", action == Action::"read", resource);

@id("catalog")
permit (principal, action == Action::"read", resource is Catalog);

@id("frozen")
@reason("account frozen")
forbid (principal in Role::"frozen", action, resource);

@id("no-interns-on-budgets")
forbid (principal in Role::"intern", action == Action::"read", resource is Budget);
"""


class TestCedarPolicyWorkerAccess(AccessContract):
    worker_name = "policy-cedar"

    @staticmethod
    def _config(directory: Path, access: str) -> dict[str, Any]:
        (directory / "policies.cedar").write_text(builtin_text(), encoding="utf-8")
        (directory / "access.cedar").write_text(access, encoding="utf-8")
        return {
            "policies_path": str(directory / "policies.cedar"),
            "access_policies_path": str(directory / "access.cedar"),
            "reload_interval": 0,
            "validate_schema": True,
        }

    def configure_shipped(self, directory: Path) -> dict[str, Any]:
        return self._config(directory, builtin_access_text())

    def configure(self, directory: Path) -> dict[str, Any]:
        return self._config(directory, ACCESS)

    def break_access(self, directory: Path) -> int:
        bad = ACCESS.replace('Action::"stream"', 'Action::"streem"')
        (directory / "access.cedar").write_text(bad, encoding="utf-8")
        return 4
