"""The ``quarantine`` worker: ``quarantine::extract``, a quarantined reader of untrusted entries.

```yaml
workers: [..., quarantine]
worker_config:
  quarantine:
    provider: openai              # the reader's model: a small one does (no tools, short answers)
    model: gpt-5-mini             # or model: openai:gpt-5-mini, provider left out
    max_input_chars: 200000       # a longer entry is refused (entry_too_large)
    budget_check_function: budget::check      # reads are charged like any model call
    budget_record_function: budget::record
    hooks_function: hook-fanout::publish_collect   # reads pass before/after_model_call
```

See docs/workers/quarantine.md for what the reader guarantees and what it does not.
"""

from __future__ import annotations

from pydantic import Field, model_validator

from tackroom.contracts.quarantine import EXTRACT
from tackroom.kit.hooks.modelcalls import ModelCallHooks
from tackroom.kit.hooks.publish import HookSubscriptions
from tackroom.runtime.tools import serve_tool
from tackroom.runtime.worker import WorkerConfig, WorkerContext, WorkerSpec
from tackroom.workers.quarantine.reader import Reader

__all__ = ["WORKER", "QuarantineConfig"]


class QuarantineConfig(WorkerConfig):
    provider: str | None = Field(
        default=None, description="the reader's provider (or give model as PROVIDER:MODEL)"
    )
    model: str | None = Field(default=None, description="the reader's model")
    max_input_chars: int = Field(default=200_000, gt=0)
    max_output_tokens: int = Field(default=2_048, gt=0)
    timeout: float = Field(default=90.0, gt=0, description="seconds for one model call")
    budget_check_function: str | None = None
    budget_record_function: str | None = None
    hooks_function: str | None = None

    @model_validator(mode="after")
    def _named(self) -> QuarantineConfig:
        self.provider_and_model()
        return self

    def provider_and_model(self) -> tuple[str, str]:
        model = self.model or ""
        if self.provider is None:
            provider, _, model = model.partition(":")
        else:
            provider = self.provider
        if not provider or not model:
            raise ValueError(
                "the quarantine worker needs its reader's model: worker_config.quarantine"
                " {provider: openai, model: gpt-5-mini} (or model: openai:gpt-5-mini)"
            )
        return provider, model


async def _start(ctx: WorkerContext[QuarantineConfig]) -> None:
    config = ctx.config
    subscriptions = None
    if config.hooks_function is not None:
        subscriptions = HookSubscriptions(ctx.engine, publish_function=config.hooks_function)
        await subscriptions.attach(ctx)
    provider, model = config.provider_and_model()
    reader = Reader(
        ctx.engine,
        provider=provider,
        model=model,
        max_input_chars=config.max_input_chars,
        max_output_tokens=config.max_output_tokens,
        timeout=config.timeout,
        budget_check_function=config.budget_check_function,
        budget_record_function=config.budget_record_function,
        hooks=ModelCallHooks(subscriptions),
    )
    await serve_tool(ctx, EXTRACT, reader.extract)


WORKER: WorkerSpec[QuarantineConfig] = WorkerSpec(
    name="quarantine",
    description="A quarantined reader (quarantine::extract): a model with no tools reads an"
    " untrusted session entry and answers a value typed by a restricted schema.",
    config_model=QuarantineConfig,
    start=_start,
)
