"""The ``policy`` worker: decide every model-issued call from the rules in ``permissions.yaml``.

```yaml
worker_config:
  policy:
    rules_path: permissions.yaml      # default; relative to the working directory
    default_decision: needs_approval  # when no rule matches
    reload_interval: 1.0              # seconds between checks of the file; 0: no hot reload
    on_error: deny                    # a call the rules fail to decide: deny (closed) | allow
```

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

import functools
import logging
from pathlib import Path

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
from tackroom.workers.policy.loader import BUILTIN_NAME, builtin_text, parse_rules
from tackroom.workers.policy.rules import Ruleset, evaluate

__all__ = ["DEFAULT_RULES_PATH", "WORKER", "PolicyConfig"]

DEFAULT_RULES_PATH = Path("permissions.yaml")

_log = logging.getLogger("tackroom.policy")


class PolicyConfig(WorkerConfig):
    rules_path: Path | None = Field(
        default=None,
        description="the rules file (relative: to the working directory); "
        "unset: ./permissions.yaml if it exists, else the built-in defaults",
    )
    default_decision: Decision = "needs_approval"
    reload_interval: float = Field(
        default=1.0, ge=0, description="seconds between checks of the file; 0: no hot reload"
    )
    on_error: OnPolicyError = Field(
        default="deny",
        description="a call the rules fail to decide (an error while evaluating them): deny it"
        " (fail closed) or allow it (fail open, rule builtin:on_error, audited by the gate)",
    )


async def _start(ctx: WorkerContext[PolicyConfig]) -> None:
    config = ctx.config
    source: RulesSource[Ruleset] = RulesSource(
        path=config.rules_path or DEFAULT_RULES_PATH,
        required=config.rules_path is not None,
        language="rules",
        parse=parse_rules,
        count=lambda ruleset: len(ruleset.rules),
        builtin_text=builtin_text(),
        builtin_name=BUILTIN_NAME,
        default_decision=config.default_decision,
        reload_interval=config.reload_interval,
        on_load=functools.partial(record_policy_load, ctx.engine, actor=ctx.name),
    )
    await source.load()

    async def check(request: CheckRequest) -> CheckResponse:
        try:
            return evaluate(
                source.rules, request.function_id, request.args, default=config.default_decision
            )
        except Exception as exc:  # the rules failed on this request: on_error decides, in words
            why = f"{type(exc).__name__}: {exc}"
            _log.warning("rules failed on %s (on_error: %s): %s", request.function_id,
                         config.on_error, why)  # fmt: skip
            return error_verdict(config.on_error, request.function_id, why)

    async def authorize(request: AuthorizeRequest) -> AuthorizeResponse:
        return source.rules.access.decide(request)

    def described() -> PolicyStatus:
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

    async def status(request: EmptyRequest) -> PolicyStatus:
        return described()

    async def reload(request: EmptyRequest) -> PolicyStatus:
        try:
            await source.reload()
        except PolicyFileError as exc:
            raise FunctionError(POLICY_FILE_INVALID, f"{exc} (the rules in force stay)") from None
        return described()

    await ctx.serve(CHECK_PERMISSIONS, check)
    await ctx.serve(AUTHORIZE, authorize)
    await ctx.serve(POLICY_STATUS, status)
    await ctx.serve(POLICY_RELOAD, reload)
    if config.reload_interval > 0:
        ctx.spawn(source.watch(), name="policy: watch rules file")


WORKER = WorkerSpec(
    name="policy",
    description=f"{CHECK_PERMISSIONS.id} from permissions.yaml rules (first match wins);"
    f" {AUTHORIZE.id} from its access: section.",
    config_model=PolicyConfig,
    start=_start,
)
