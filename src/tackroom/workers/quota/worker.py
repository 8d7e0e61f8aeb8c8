"""The ``quota`` worker: rate limits and a concurrency cap per tenant and user, for every process
on one engine.

It serves ``quota::admit`` (one request of the caller's and its tenant's ``requests_per_minute``,
and a run slot under ``max_concurrent_runs``) and ``quota::release``, and charges each model
call's tokens to ``tokens_per_minute`` through an ``after_model_call`` hook. The gateway asks
``quota::admit`` before it starts a run, and answers a refusal with 429 and ``Retry-After``.
The counts live in the engine's state (:mod:`tackroom.kit.quota`), so gateway replicas on one
engine share them.

```yaml
workers: [engine, hooks, quota, ...]       # after hooks: charging tokens needs hook-fanout
worker_config:
  quota:
    default:
      user: {requests_per_minute: 60, tokens_per_minute: 200000, max_concurrent_runs: 4}
      tenant: {max_concurrent_runs: 20}
    tenants: {acme: {requests_per_minute: 600}}
    users: {"acme/alice": {max_concurrent_runs: 10}}
```
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic import ConfigDict, ValidationError

from tackroom.contracts.hooks import AFTER_MODEL_CALL, AfterModelCall
from tackroom.contracts.quota import (
    ADMIT,
    RELEASE,
    AdmitRequest,
    Admitted,
    Released,
    ReleaseRequest,
)
from tackroom.kit.hooks.subscribe import hook
from tackroom.kit.quota import acquire_run, admit_request, record_tokens, release_run
from tackroom.kit.quota_base import QuotaExceeded, QuotaSettings
from tackroom.runtime.worker import WorkerContext, WorkerSpec

__all__ = ["WORKER", "QuotaConfig"]

_log = logging.getLogger("tackroom.quota")


class QuotaConfig(QuotaSettings):
    """``worker_config.quota``: the limits (:class:`~tackroom.kit.quota_base.QuotaSettings`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


async def _start(ctx: WorkerContext[QuotaConfig]) -> None:
    settings = ctx.config
    engine = ctx.engine

    async def admit(request: AdmitRequest) -> Admitted:
        try:
            admission = await admit_request(engine, principal=request.principal, settings=settings)
        except QuotaExceeded as exc:
            return Admitted(admitted=False, refusal=exc.refusal)
        try:
            await acquire_run(
                engine,
                principal=request.principal,
                settings=settings,
                run_id=request.run_id,
                session_id=request.session_id,
            )
        except QuotaExceeded as exc:
            return Admitted(admitted=False, refusal=exc.refusal)
        return Admitted(admitted=True, requests_remaining=admission.requests_remaining)

    async def release(request: ReleaseRequest) -> Released:
        await release_run(
            engine, principal=request.principal, settings=settings, run_id=request.run_id
        )
        return Released()

    async def charge(payload: Any) -> None:
        """Observes only: the answer passes unchanged."""
        try:
            call = AfterModelCall.model_validate(payload)
        except ValidationError:
            return
        usage = call.message.usage
        tokens = usage.input_tokens + usage.output_tokens
        if call.principal is not None and tokens > 0:
            await record_tokens(engine, principal=call.principal, settings=settings, tokens=tokens)
        return

    await ctx.serve(ADMIT, admit)
    await ctx.serve(RELEASE, release)
    await hook(
        ctx,
        AFTER_MODEL_CALL,
        charge,
        name="charge_tokens",
        description="Charge each model call's tokens to its principal's tokens_per_minute.",
    )


WORKER = WorkerSpec(
    name="quota",
    description="Rate limits and a concurrency cap per tenant and user (quota::admit).",
    config_model=QuotaConfig,
    start=_start,
)
