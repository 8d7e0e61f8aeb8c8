"""The ``policy-cedar`` worker: ``policy::check_permissions`` decided by Cedar policies.

It registers the same function ids as ``policy`` (check, status, reload), so either one can be
booted: the contract suite runs against both. Policies are Cedar (``cedarpy``); the request
mapping is in :mod:`tackroom.workers.policy_cedar.mapping`, the decision order in
:mod:`tackroom.workers.policy_cedar.policies`.

```yaml
worker_config:
  policy-cedar:
    policies_path: policies.cedar     # default; relative to the working directory
    default_decision: needs_approval  # when no policy applies
    reload_interval: 1.0              # seconds between checks of the file; 0: no hot reload
    validate_schema: false            # true: the file must validate against schema.cedarschema
```

Without ``policies_path`` the worker reads ``./policies.cedar`` when it exists and uses the
built-in ``defaults.cedar`` when it does not; a ``policies_path`` that is set must exist. A file
that does not parse stops the start; once running, a bad edit is rejected whole and the policies
in force stay (``policy::status`` shows why).
"""

from __future__ import annotations

import functools
from importlib import resources
from pathlib import Path

import cedarpy
from pydantic import Field

from tackroom.contracts.policy import (
    CHECK_PERMISSIONS,
    POLICY_FILE_INVALID,
    POLICY_RELOAD,
    POLICY_STATUS,
    CheckRequest,
    CheckResponse,
    Decision,
    EmptyRequest,
    PolicyStatus,
)
from tackroom.engine.errors import FunctionError
from tackroom.kit.audit import record_policy_load
from tackroom.kit.rulesfile import PolicyFileError, RulesSource
from tackroom.runtime.worker import WorkerConfig, WorkerContext, WorkerSpec
from tackroom.workers.policy_cedar.policies import CedarPolicies, decide, parse_policies

__all__ = [
    "BUILTIN_NAME",
    "DEFAULT_POLICIES_PATH",
    "WORKER",
    "CedarPolicyConfig",
    "builtin_text",
    "schema_text",
]

DEFAULT_POLICIES_PATH = Path("policies.cedar")
BUILTIN_NAME = "<builtin policies.cedar>"


def builtin_text() -> str:
    return (resources.files(__package__) / "defaults.cedar").read_text(encoding="utf-8")


def schema_text() -> str:
    """tackroom's Cedar schema (``schema.cedarschema``): principal, actions, resources."""
    return (resources.files(__package__) / "schema.cedarschema").read_text(encoding="utf-8")


class CedarPolicyConfig(WorkerConfig):
    policies_path: Path | None = Field(
        default=None,
        description="the Cedar policy file (relative: to the working directory); "
        "unset: ./policies.cedar if it exists, else the built-in defaults",
    )
    default_decision: Decision = "needs_approval"
    reload_interval: float = Field(
        default=1.0, ge=0, description="seconds between checks of the file; 0: no hot reload"
    )
    validate_schema: bool = Field(
        default=False,
        description="reject a policy file that does not validate against schema.cedarschema",
    )


async def _start(ctx: WorkerContext[CedarPolicyConfig]) -> None:
    config = ctx.config
    source: RulesSource[CedarPolicies] = RulesSource(
        path=config.policies_path or DEFAULT_POLICIES_PATH,
        required=config.policies_path is not None,
        language="cedar",
        parse=functools.partial(
            parse_policies,
            schema=cedarpy.Schema.from_str(schema_text()) if config.validate_schema else None,
        ),
        count=lambda policies: len(policies.policies),
        builtin_text=builtin_text(),
        builtin_name=BUILTIN_NAME,
        default_decision=config.default_decision,
        reload_interval=config.reload_interval,
        on_load=functools.partial(record_policy_load, ctx.engine, actor=ctx.name),
    )
    await source.load()

    async def check(request: CheckRequest) -> CheckResponse:
        return decide(source.rules, request, default=config.default_decision)

    async def status(request: EmptyRequest) -> PolicyStatus:
        return source.status()

    async def reload(request: EmptyRequest) -> PolicyStatus:
        try:
            await source.reload()
        except PolicyFileError as exc:
            raise FunctionError(
                POLICY_FILE_INVALID, f"{exc} (the policies in force stay)"
            ) from None
        return source.status()

    await ctx.serve(
        CHECK_PERMISSIONS, check, description="May a model's call run? Decided by Cedar policies."
    )
    await ctx.serve(
        POLICY_STATUS,
        status,
        description="The Cedar policies in force, where they came from, the last rejected file.",
    )
    await ctx.serve(
        POLICY_RELOAD,
        reload,
        description="Read the Cedar policy file now; a bad file is rejected, the policies stay.",
    )
    if config.reload_interval > 0:
        ctx.spawn(source.watch(), name="policy-cedar: watch policy file")


WORKER = WorkerSpec(
    name="policy-cedar",
    description=f"{CHECK_PERMISSIONS.id} from Cedar policies (cedarpy).",
    config_model=CedarPolicyConfig,
    start=_start,
)
