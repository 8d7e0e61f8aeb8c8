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
    flow_rules: [secret-out, untrusted-destination, typed-destination, untrusted-arguments]
```

``flow_rules`` are the built-in flow rules applied before the policies; the policies see the
same facts as ``context.flow`` (:func:`~tackroom.workers.policy_cedar.mapping.flow_context`).

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
from collections.abc import Callable
from importlib import resources
from pathlib import Path

import cedarpy
from pydantic import Field

from tackroom.contracts.policy import (
    AUTHORIZE,
    CHECK_PERMISSIONS,
    POLICY_RELOAD,
    POLICY_STATUS,
    CheckRequest,
    CheckResponse,
    Decision,
)
from tackroom.kit.policy_serving import PolicyWorkerConfig, rules_source, serve_policy
from tackroom.kit.rulesfile import RulesLanguage, RulesSource
from tackroom.runtime.worker import WorkerContext, WorkerSpec
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

_DESCRIPTIONS = {
    CHECK_PERMISSIONS.id: "May a model's call run? Decided by Cedar policies.",
    AUTHORIZE.id: "May this principal do this action to this resource? Cedar access policies.",
    POLICY_STATUS.id: "The Cedar policies in force, where they came from, the last rejected file.",
    POLICY_RELOAD.id: "Read the Cedar policy file now; a bad file is rejected, the policies stay.",
}


def builtin_text() -> str:
    return (resources.files(__package__) / "defaults.cedar").read_text(encoding="utf-8")


def builtin_access_text() -> str:
    """The access policies in force when there is no access file (``defaults_access.cedar``)."""
    return (resources.files(__package__) / "defaults_access.cedar").read_text(encoding="utf-8")


def schema_text() -> str:
    """tackroom's Cedar schema (``schema.cedarschema``): principal, actions, resources."""
    return (resources.files(__package__) / "schema.cedarschema").read_text(encoding="utf-8")


class CedarPolicyConfig(PolicyWorkerConfig):
    policies_path: Path | None = Field(
        default=None,
        description="the Cedar policy file (relative: to the working directory); "
        "unset: ./policies.cedar if it exists, else the built-in defaults",
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


async def _start(ctx: WorkerContext[CedarPolicyConfig]) -> None:
    config = ctx.config
    schema = cedarpy.Schema.from_str(schema_text()) if config.validate_schema else None

    def policies(
        path: Path | None,
        default_path: Path,
        parse: Callable[..., CedarPolicies],
        builtin: tuple[str, str],
        default_decision: Decision,
    ) -> RulesSource[CedarPolicies]:
        return rules_source(
            ctx,
            path=path,
            default_path=default_path,
            language=RulesLanguage(
                name="cedar",
                parse=functools.partial(parse, schema=schema),
                count=lambda policies: len(policies.policies),
                builtin_text=builtin[0],
                builtin_name=builtin[1],
            ),
            default_decision=default_decision,
            reload_interval=config.reload_interval,
        )

    source = policies(
        config.policies_path,
        DEFAULT_POLICIES_PATH,
        parse_policies,
        (builtin_text(), BUILTIN_NAME),
        config.default_decision,
    )
    access = policies(
        config.access_policies_path,
        DEFAULT_ACCESS_PATH,
        parse_access,
        (builtin_access_text(), BUILTIN_ACCESS_NAME),
        "deny",
    )
    answers = AccessAnswers()

    def check(request: CheckRequest) -> CheckResponse:
        return decide(
            source.rules, request, default=config.default_decision, on_error=config.on_error
        )

    await serve_policy(
        ctx,
        sources=[source, access],
        decide=check,
        authorize=lambda request: answers.decide(access.rules, request),
        status=lambda: source.status().model_copy(update={"access": access.status()}),
        on_error=config.on_error,
        reload_interval=config.reload_interval,
        flow_rules=config.flow_rules,
        language="policies",
        descriptions=_DESCRIPTIONS,
    )


WORKER = WorkerSpec(
    name="policy-cedar",
    description=f"{CHECK_PERMISSIONS.id} and {AUTHORIZE.id} from Cedar policies (cedarpy).",
    config_model=CedarPolicyConfig,
    start=_start,
)
