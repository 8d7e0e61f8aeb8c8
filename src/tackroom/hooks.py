"""Hooks for users: register a function on a topic the turn publishes, in a few lines.

``await hook(ctx, "after_function_call", redact)`` in a worker's ``start``, or
``WORKER = hook_worker("guard", before_function_call=gate)``. See ``docs/workers/hooks.md``.
"""

from __future__ import annotations

from tackroom.contracts.hooks import (
    AFTER_FUNCTION_CALL,
    AFTER_MODEL_CALL,
    BEFORE_FUNCTION_CALL,
    BEFORE_MODEL_CALL,
    TOPICS,
    TURN_END,
    HookReply,
    PublishResult,
)
from tackroom.kit.hooks.publish import HookSubscriptions
from tackroom.kit.hooks.subscribe import (
    Hook,
    HookFunction,
    HookSpec,
    HookWorkerConfig,
    block,
    hook,
    hook_worker,
    on,
    replace,
)

__all__ = [
    "AFTER_FUNCTION_CALL",
    "AFTER_MODEL_CALL",
    "BEFORE_FUNCTION_CALL",
    "BEFORE_MODEL_CALL",
    "TOPICS",
    "TURN_END",
    "Hook",
    "HookFunction",
    "HookReply",
    "HookSpec",
    "HookSubscriptions",
    "HookWorkerConfig",
    "PublishResult",
    "block",
    "hook",
    "hook_worker",
    "on",
    "replace",
]
