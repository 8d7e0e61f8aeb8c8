"""The ``policy-cedar`` worker: ``policy::check_permissions`` and ``policy::authorize`` in Cedar.

It registers the same function ids as ``policy`` (check, authorize, status, reload), so either
one can be booted: the contract suites run against both. Policies are Cedar (``cedarpy``); the
request mapping is in :mod:`tackroom.workers.policy_cedar.mapping`, the decision order in
:mod:`tackroom.workers.policy_cedar.policies`.

```yaml
worker_config:
  policy-cedar:
    policies_path: policies.cedar     # default; relative to the working directory
    default_decision: needs_approval  # when no policy applies
    reload_interval: 1.0              # seconds between checks of the file; 0: no hot reload
    validate_schema: false            # true: the files must validate against schema.cedarschema
    access_policies_path: access.cedar  # default; who may do what to sessions, budgets…
    on_error: deny                    # a call Cedar cannot decide: deny (closed) | allow (open)
```

Without ``policies_path`` the worker reads ``./policies.cedar`` when it exists and uses the
built-in ``defaults.cedar`` when it does not; a ``policies_path`` that is set must exist. A file
that does not parse stops the start; once running, a bad edit is rejected whole and the policies
in force stay (``policy::status`` shows why).

``policy::authorize`` (may a principal read, run, approve… a session, an approval, a budget?)
is decided by a second file, ``access_policies_path``, loaded and watched the same way, with the
built-in ``defaults_access.cedar`` when it is unset and ``./access.cedar`` does not exist
(:mod:`tackroom.workers.policy_cedar.access`); ``policy::status`` reports it as ``access``.
"""

from __future__ import annotations

import functools
import logging
from importlib import resources
from pathlib import Path

import cedarpy
from pydantic import Field

from tackroom.contracts.policy import (
    AUTHORIZE,
    CHECK_PERMISSIONS,
    POLICY_FILE_INVALID,
    POLICY_RELOAD,
    POLICY_STATUS,
    AuthorizeRequest,
    AuthorizeResponse,
    CheckRequest,
    CheckResponse,
    Decision,
    EmptyRequest,
    PolicyStatus,
    error_verdict,
)
from tackroom.contracts.tools import OnPolicyError
from tackroom.engine.errors import FunctionError
from tackroom.kit.audit import record_policy_load
from tackroom.kit.rulesfile import PolicyFileError, RulesSource
from tackroom.runtime.worker import WorkerConfig, WorkerContext, WorkerSpec
from tackroom.workers.policy_cedar.access import AccessAnswers, parse_access
from tackroom.workers.policy_cedar.policies import CedarPolicies, decide, parse_policies

__all__ = [
    "BUILTIN_ACCESS_NAME",
    "BUILTIN_NAME",
    "DEFAULT_ACCESS_PATH",
    "DEFAULT_POLICIES_PATH",
    "WORKER",
    "CedarPolicyConfig",
    "builtin_access_text",
    "builtin_text",
    "schema_text",
]

DEFAULT_POLICIES_PATH = Path("policies.cedar")
BUILTIN_NAME = "<builtin policies.cedar>"
DEFAULT_ACCESS_PATH = Path("access.cedar")
BUILTIN_ACCESS_NAME = "<builtin access.cedar>"

_log = logging.getLogger("tackroom.policy")


def builtin_text() -> str:
    return (resources.files(__package__) / "defaults.cedar").read_text(encoding="utf-8")


def builtin_access_text() -> str:
    """The access policies in force when there is no access file (``defaults_access.cedar``)."""
    return (resources.files(__package__) / "defaults_access.cedar").read_text(encoding="utf-8")


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
    access_policies_path: Path | None = Field(
        default=None,
        description="the Cedar access policies of policy::authorize (relative: to the working"
        " directory); unset: ./access.cedar if it exists, else the built-in defaults",
    )
    on_error: OnPolicyError = Field(
        default="deny",
        description="a call Cedar cannot decide (a policy in error, no decision): deny it (fail"
        " closed) or allow it (fail open, rule builtin:on_error, audited by the gate)",
    )


async def _start(ctx: WorkerContext[CedarPolicyConfig]) -> None:
    config = ctx.config
    schema = cedarpy.Schema.from_str(schema_text()) if config.validate_schema else None
    on_load = functools.partial(record_policy_load, ctx.engine, actor=ctx.name)
    source: RulesSource[CedarPolicies] = RulesSource(
        path=config.policies_path or DEFAULT_POLICIES_PATH,
        required=config.policies_path is not None,
        language="cedar",
        parse=functools.partial(parse_policies, schema=schema),
        count=lambda policies: len(policies.policies),
        builtin_text=builtin_text(),
        builtin_name=BUILTIN_NAME,
        default_decision=config.default_decision,
        reload_interval=config.reload_interval,
        on_load=on_load,
    )
    access: RulesSource[CedarPolicies] = RulesSource(
        path=config.access_policies_path or DEFAULT_ACCESS_PATH,
        required=config.access_policies_path is not None,
        language="cedar",
        parse=functools.partial(parse_access, schema=schema),
        count=lambda policies: len(policies.policies),
        builtin_text=builtin_access_text(),
        builtin_name=BUILTIN_ACCESS_NAME,
        default_decision="deny",
        reload_interval=config.reload_interval,
        on_load=on_load,
    )
    await source.load()
    await access.load()
    answers = AccessAnswers()

    async def check(request: CheckRequest) -> CheckResponse:
        try:
            return decide(
                source.rules, request, default=config.default_decision, on_error=config.on_error
            )
        except Exception as exc:  # Cedar failed on this request: on_error decides, in words
            why = f"{type(exc).__name__}: {exc}"
            _log.warning("Cedar failed on %s (on_error: %s): %s", request.function_id,
                         config.on_error, why)  # fmt: skip
            return error_verdict(config.on_error, request.function_id, why)

    async def authorize(request: AuthorizeRequest) -> AuthorizeResponse:
        return answers.decide(access.rules, request)

    def described() -> PolicyStatus:
        return source.status().model_copy(update={"access": access.status()})

    async def status(request: EmptyRequest) -> PolicyStatus:
        return described()

    async def reload(request: EmptyRequest) -> PolicyStatus:
        problems: list[PolicyFileError] = []
        for each in (source, access):
            try:
                await each.reload()
            except PolicyFileError as exc:
                problems.append(exc)
        if problems:
            raise FunctionError(
                POLICY_FILE_INVALID, f"{problems[0]} (the policies in force stay)"
            ) from None
        return described()

    await ctx.serve(
        CHECK_PERMISSIONS, check, description="May a model's call run? Decided by Cedar policies."
    )
    await ctx.serve(
        AUTHORIZE,
        authorize,
        description="May this principal do this action to this resource? Cedar access policies.",
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
        ctx.spawn(access.watch(), name="policy-cedar: watch access policy file")


WORKER = WorkerSpec(
    name="policy-cedar",
    description=f"{CHECK_PERMISSIONS.id} and {AUTHORIZE.id} from Cedar policies (cedarpy).",
    config_model=CedarPolicyConfig,
    start=_start,
)
