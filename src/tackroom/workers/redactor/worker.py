"""The ``redactor`` worker: scrub secrets from function results before the model sees them.

It subscribes ``hook::redactor::redact`` to ``after_function_call`` (through
:func:`tackroom.hooks.hook`), so with the orchestrator's ``hooks_function`` set every function
result passes through it before it reaches the session, the call ledger, the events and the
model. Text blocks and ``details`` are scrubbed; a result with nothing to scrub is left as it is.

```yaml
workers: [engine, hooks, redactor, ...]      # after hooks: subscribing needs hook-fanout
worker_config:
  redactor:
    replacement: "[REDACTED:{name}]"
    extra_patterns:                          # added to the built-in patterns
      - {name: ticket_token, regex: "TT-[0-9a-f]{32}"}
```
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from pydantic import Field, field_validator

from tackroom.contracts.hooks import AFTER_FUNCTION_CALL, hook_function
from tackroom.contracts.redaction import (
    DEFAULT_PATTERNS,
    DEFAULT_REPLACEMENT,
    RedactPattern,
    check_replacement,
)
from tackroom.kit.hooks.subscribe import block, hook, replace
from tackroom.kit.redaction import Redactor, TooDeep
from tackroom.runtime.worker import WorkerConfig, WorkerContext, WorkerSpec

__all__ = ["HOOK_FUNCTION", "WORKER", "RedactorConfig", "redact_hook"]

_NAME = "redactor"
_HOOK = "redact"
HOOK_FUNCTION = hook_function(_NAME, _HOOK).id
"""The id the redactor's hook is registered and subscribed under."""

_log = logging.getLogger("tackroom.workers.redactor")


class RedactorConfig(WorkerConfig):
    patterns: list[RedactPattern] = Field(
        default_factory=lambda: list(DEFAULT_PATTERNS),
        description="what to redact, in order (default: the built-in patterns)",
    )
    extra_patterns: list[RedactPattern] = Field(
        default_factory=list, description="patterns run after `patterns`"
    )
    replacement: str = Field(
        default=DEFAULT_REPLACEMENT, description="what a match becomes; {name}: the pattern's name"
    )
    priority: int = Field(
        default=0, description="place in the after_function_call chain (lower runs earlier)"
    )

    @field_validator("replacement")
    @classmethod
    def _replacement(cls, value: str) -> str:
        return check_replacement(value)


def redact_hook(redactor: Redactor) -> Any:
    """The ``after_function_call`` hook function: ``None`` when nothing matched, else the payload
    with its ``result`` scrubbed; a result it cannot walk blocks (the result is withheld)."""

    async def redact(payload: Any) -> Any:
        if not isinstance(payload, dict) or not isinstance(payload.get("result"), dict):
            return None  # not a function result: nothing of ours to scrub
        counts: Counter[str] = Counter()
        try:
            result = redactor.result(payload["result"], counts)
        except TooDeep as exc:
            return block(f"redactor: {exc}")
        if not counts:
            return None
        _log.info(
            "redacted %s in the result of %s (call %s)",
            ", ".join(f"{count} {name}" for name, count in sorted(counts.items())),
            payload.get("function_id"),
            payload.get("function_call_id"),
        )
        return replace({**payload, "result": result})

    return redact


async def start(ctx: WorkerContext[RedactorConfig]) -> None:
    config = ctx.config
    redactor = Redactor([*config.patterns, *config.extra_patterns], replacement=config.replacement)
    await hook(
        ctx,
        AFTER_FUNCTION_CALL,
        redact_hook(redactor),
        name=_HOOK,
        priority=config.priority,
        description="Redact secrets (API keys, tokens, private keys) from function results.",
    )


WORKER = WorkerSpec(
    name=_NAME,
    description="Redacts secrets from function results (an after_function_call hook).",
    config_model=RedactorConfig,
    start=start,
)
