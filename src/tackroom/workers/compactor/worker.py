"""The ``compactor`` worker: ``compaction::compact`` summarises the oldest part of a session.

```yaml
worker_config:
  compactor:
    model: openai:gpt-5-mini     # a cheaper model for summaries (default: the session's)
    keep_ratio: 0.5              # of the target, kept whole as the newest entries
    summary_ratio: 0.25          # of the target, at most, for the summary
    budget_check_function: budget::check     # summaries are charged like any model call
    budget_record_function: budget::record
    hooks_function: hook-fanout::publish_collect   # summaries pass before/after_model_call
```

The summary is appended as a compaction entry whose id derives from the leaf it was computed at
(:func:`~tackroom.contracts.context.compaction_entry_id`): a retry after a crash finds it (or
stores the one summary), never two. Replace the worker by serving ``compaction::compact``
yourself; :class:`tackroom.testing.contracts.CompactorContract` checks a replacement.
"""

from __future__ import annotations

from pydantic import Field

from tackroom.contracts.context import COMPACT
from tackroom.kit.hooks.modelcalls import ModelCallHooks
from tackroom.kit.hooks.publish import HookSubscriptions
from tackroom.runtime.worker import WorkerConfig, WorkerContext, WorkerSpec
from tackroom.workers.compactor.compaction import Compactor

__all__ = ["WORKER", "CompactorConfig"]


class CompactorConfig(WorkerConfig):
    model: str | None = Field(
        default=None, description="PROVIDER:MODEL for summaries (default: the session's model)"
    )
    keep_ratio: float = Field(default=0.5, gt=0, lt=1)
    summary_ratio: float = Field(default=0.25, gt=0, lt=1)
    budget_check_function: str | None = None
    budget_record_function: str | None = None
    timeout: float = Field(default=300.0, gt=0, description="seconds for one summary call")
    hooks_function: str | None = None
    """e.g. ``hook-fanout::publish_collect``: summaries pass the model-call hooks like any call."""


async def _start(ctx: WorkerContext[CompactorConfig]) -> None:
    config = ctx.config
    subscriptions = None
    if config.hooks_function is not None:
        subscriptions = HookSubscriptions(ctx.engine, publish_function=config.hooks_function)
        await subscriptions.attach(ctx)  # no subscriber, no round trip
    compactor = Compactor(
        ctx.engine,
        model=config.model,
        keep_ratio=config.keep_ratio,
        summary_ratio=config.summary_ratio,
        budget_check_function=config.budget_check_function,
        budget_record_function=config.budget_record_function,
        timeout=config.timeout,
        hooks=ModelCallHooks(subscriptions),
    )
    await ctx.serve(COMPACT, compactor.compact)


WORKER: WorkerSpec[CompactorConfig] = WorkerSpec(
    name="compactor",
    description="Compaction (compaction::compact): summarises the oldest history into an entry "
    "naming what it replaces; pinned entries are carried whole.",
    config_model=CompactorConfig,
    start=_start,
)
