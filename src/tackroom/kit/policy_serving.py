"""What the policy workers share: their watched rules files and the four functions they serve.

``policy`` (YAML rules) and ``policy-cedar`` (Cedar policies) differ only in how a file compiles
and how a request is decided. Both get their files from :func:`rules_source` (an optional
default path or a required configured one, the built-in text while it is absent, every load
recorded in the audit trail) and serve ``policy::check_permissions``, ``policy::authorize``,
``policy::status`` and ``policy::reload`` with :func:`serve_policy`:

- ``check`` denies a protected function, then applies the flow rules in the worker's
  ``flow_rules`` (:mod:`tackroom.contracts.flow`: a destination copied from untrusted content,
  a secret sent out...), then asks the worker's ``decide``; a request the rules fail on (an
  exception while deciding) is decided by ``on_error`` — denied (fail closed) or allowed (fail
  open, audited by the gate) — with the reason in words;
- ``reload`` reads every file now; a file that does not parse is rejected
  (``policy_file_invalid``) and the rules in force stay;
- with ``reload_interval > 0`` every file is watched.

Their config sections share :class:`PolicyWorkerConfig`.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from pydantic import Field

from tackroom.contracts.flow import DEFAULT_FLOW_RULES, FlowRule, flow_verdict
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
    protected_verdict,
)
from tackroom.contracts.tools import OnPolicyError
from tackroom.engine.errors import FunctionError
from tackroom.kit.audit import record_policy_load
from tackroom.kit.rulesfile import PolicyFileError, RulesLanguage, RulesSource
from tackroom.runtime.worker import WorkerConfig, WorkerContext

__all__ = ["PolicyWorkerConfig", "rules_source", "serve_policy"]

T = TypeVar("T")

_log = logging.getLogger("tackroom.policy")


class PolicyWorkerConfig(WorkerConfig):
    """What every policy worker's section holds besides the paths of its files."""

    default_decision: Decision = Field(
        default="needs_approval", description="the decision when no rule or policy applies"
    )
    reload_interval: float = Field(
        default=1.0, ge=0, description="seconds between checks of the file; 0: no hot reload"
    )
    on_error: OnPolicyError = Field(
        default="deny",
        description="a call the rules or policies fail to decide (an error while evaluating"
        " them): deny it (fail closed) or allow it (fail open, rule builtin:on_error, audited"
        " by the gate)",
    )
    flow_rules: list[FlowRule] = Field(
        default_factory=lambda: list(DEFAULT_FLOW_RULES),
        description="the built-in flow rules applied before the file's (prompt-injection"
        " containment, docs/injection.md); [] turns them off",
    )


def rules_source(
    ctx: WorkerContext[Any],
    *,
    path: Path | None,
    default_path: Path,
    language: RulesLanguage[T],
    default_decision: Decision,
    reload_interval: float,
) -> RulesSource[T]:
    """A rules file of the worker: ``path`` (required to exist) or else ``default_path`` (the
    built-in text while it is absent); each set of rules that comes into force is audited."""
    return RulesSource(
        path=path or default_path,
        required=path is not None,
        language=language,
        default_decision=default_decision,
        reload_interval=reload_interval,
        on_load=functools.partial(record_policy_load, ctx.engine, actor=ctx.name),
    )


async def serve_policy(
    ctx: WorkerContext[Any],
    *,
    sources: Sequence[RulesSource[Any]],
    decide: Callable[[CheckRequest], CheckResponse],
    authorize: Callable[[AuthorizeRequest], AuthorizeResponse],
    status: Callable[[], PolicyStatus],
    on_error: OnPolicyError,
    reload_interval: float,
    language: str,
    flow_rules: Sequence[FlowRule] = DEFAULT_FLOW_RULES,
    descriptions: Mapping[str, str] | None = None,
) -> None:
    """Serve the policy functions from ``sources`` (loaded here); ``language`` names what
    decides in logs and errors (``rules``, ``Cedar policies``); ``descriptions`` by function
    id replace the contract's."""
    for source in sources:
        await source.load()

    async def check(request: CheckRequest) -> CheckResponse:
        first = protected_verdict(request.function_id) or flow_verdict(
            request.function_id, request.flow, rules=flow_rules
        )
        if first is not None:
            return first
        try:
            return decide(request)
        except Exception as exc:  # the rules failed on this request: on_error decides, in words
            why = f"{type(exc).__name__}: {exc}"
            _log.warning("%s failed on %s (on_error: %s): %s", language, request.function_id,
                         on_error, why)  # fmt: skip
            return error_verdict(on_error, request.function_id, why)

    async def authorized(request: AuthorizeRequest) -> AuthorizeResponse:
        return authorize(request)

    async def described(request: EmptyRequest) -> PolicyStatus:
        return status()

    async def reload(request: EmptyRequest) -> PolicyStatus:
        problems: list[PolicyFileError] = []
        for source in sources:
            try:
                await source.reload()
            except PolicyFileError as exc:
                problems.append(exc)
        if problems:
            raise FunctionError(
                POLICY_FILE_INVALID, f"{problems[0]} (the {language} in force stay)"
            ) from None
        return status()

    said = descriptions or {}
    await ctx.serve(CHECK_PERMISSIONS, check, description=said.get(CHECK_PERMISSIONS.id))
    await ctx.serve(AUTHORIZE, authorized, description=said.get(AUTHORIZE.id))
    await ctx.serve(POLICY_STATUS, described, description=said.get(POLICY_STATUS.id))
    await ctx.serve(POLICY_RELOAD, reload, description=said.get(POLICY_RELOAD.id))
    if reload_interval > 0:
        for source in sources:
            ctx.spawn(source.watch(), name=f"{ctx.name}: watch {source.path.name}")
