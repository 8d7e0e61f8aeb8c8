"""The ``policy`` worker: decide every model-issued call from the rules in ``permissions.yaml``.

```yaml
worker_config:
  policy:
    rules_path: permissions.yaml      # default; relative to the working directory
    default_decision: needs_approval  # when no rule matches
    reload_interval: 1.0              # seconds between checks of the file; 0: no hot reload
    on_error: deny                    # a call the rules fail to decide: deny (closed) | allow
    flow_rules: [secret-out, untrusted-destination, typed-destination, untrusted-arguments]
```

``flow_rules`` are the built-in flow rules (:mod:`tackroom.contracts.flow`) applied before the
file's, after the protected functions; a rule's own ``flow:`` block tests the same facts
(:mod:`tackroom.workers.policy.flow`).

Without ``rules_path`` the worker reads ``./permissions.yaml`` when it exists and uses the
built-in defaults (``defaults.yaml``) when it does not (and again if it is removed later). A
``rules_path`` that is set must exist at start; if it disappears later the rules in force stay.
A file that does not parse stops the worker from starting; once running, a bad edit is rejected
whole, the rules in force stay, and ``policy::status`` shows the line and the reason.

The same file's ``access:`` section decides ``policy::authorize`` — may a principal read, run,
approve… a session, an approval, a budget? (:mod:`tackroom.workers.policy.access`); a file
without one gets the built-in section of ``defaults.yaml``, the gateway's historical role table.

Why ``needs_approval`` by default: ``allow`` would run every tool nobody thought about, and
``deny`` would make a harness without a rules file useless; asking a human is the safe middle,
and one catch-all rule (``function: "*"``) changes it.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from tackroom.contracts.policy import (
    AUTHORIZE,
    CHECK_PERMISSIONS,
    CheckRequest,
    CheckResponse,
    PolicyStatus,
)
from tackroom.kit.policy_serving import PolicyWorkerConfig, rules_source, serve_policy
from tackroom.kit.rulesfile import RulesLanguage, RulesSource
from tackroom.runtime.worker import WorkerContext, WorkerSpec
from tackroom.workers.policy.loader import BUILTIN_NAME, builtin_text, parse_rules
from tackroom.workers.policy.rules import Ruleset, evaluate

__all__ = ["DEFAULT_RULES_PATH", "WORKER", "PolicyConfig"]

DEFAULT_RULES_PATH = Path("permissions.yaml")


class PolicyConfig(PolicyWorkerConfig):
    rules_path: Path | None = Field(
        default=None,
        description="the rules file (relative: to the working directory); "
        "unset: ./permissions.yaml if it exists, else the built-in defaults",
    )


async def _start(ctx: WorkerContext[PolicyConfig]) -> None:
    config = ctx.config
    source: RulesSource[Ruleset] = rules_source(
        ctx,
        path=config.rules_path,
        default_path=DEFAULT_RULES_PATH,
        language=RulesLanguage(
            name="rules",
            parse=parse_rules,
            count=lambda ruleset: len(ruleset.rules),
            builtin_text=builtin_text(),
            builtin_name=BUILTIN_NAME,
        ),
        default_decision=config.default_decision,
        reload_interval=config.reload_interval,
    )

    def check(request: CheckRequest) -> CheckResponse:
        return evaluate(
            source.rules,
            request.function_id,
            request.args,
            default=config.default_decision,
            flow=request.flow,
        )

    def status() -> PolicyStatus:
        status = source.status()
        access = source.rules.access
        builtin = status.source == "builtin" or access.builtin
        return status.model_copy(
            update={
                "access": status.model_copy(
                    update={
                        "source": "builtin" if builtin else "file",
                        "rule_count": len(access.rules),
                        "default_decision": "deny",
                    }
                )
            }
        )

    await serve_policy(
        ctx,
        sources=[source],
        decide=check,
        authorize=lambda request: source.rules.access.decide(request),
        status=status,
        on_error=config.on_error,
        reload_interval=config.reload_interval,
        flow_rules=config.flow_rules,
        language="rules",
    )


WORKER = WorkerSpec(
    name="policy",
    description=f"{CHECK_PERMISSIONS.id} from permissions.yaml rules (first match wins);"
    f" {AUTHORIZE.id} from its access: section.",
    config_model=PolicyConfig,
    start=_start,
)
