"""Manual compaction, shared by the facade, the CLI and the gateway: the session's model and the
target a ``compaction::compact`` asked for by a person is given.

The target is what the orchestrator would budget for the model — its window (the catalog's, or
``context_window_limit`` when smaller) minus the reserve for the answer — less the pinned entries
carried whole; :data:`DEFAULT_WINDOW_TOKENS` when no catalog knows the model and no limit is set.
"""

from __future__ import annotations

from pydantic import ValidationError

from tackroom.contracts.bus import Caller
from tackroom.contracts.catalog import MODELS_GET, GetRequest, ModelInfo
from tackroom.contracts.context import COMPACT, CompactRequest, CompactResponse, ContextSettings
from tackroom.contracts.messages import AssistantMessage
from tackroom.contracts.principal import Principal
from tackroom.contracts.sessions import MESSAGES, MessagesRequest, MessagesResponse
from tackroom.engine.errors import EngineError
from tackroom.kit.context import (
    DEFAULT_CHARS_PER_TOKEN,
    first_turn,
    message_chars,
    window_and_reserve,
)

__all__ = [
    "COMPACT_TIMEOUT",
    "DEFAULT_WINDOW_TOKENS",
    "compact_now",
    "manual_request",
    "manual_target",
    "session_model",
]

DEFAULT_WINDOW_TOKENS = 32_000
"""The window assumed for a model no catalog describes (a scripted or local model)."""
COMPACT_TIMEOUT = 300.0
"""Seconds a manual compaction may take: it is a model call (the compactor's own default)."""
_MIN_TARGET = 64


def session_model(path: MessagesResponse) -> tuple[str, str] | None:
    """``(provider, model)`` of the newest answer on the path: the model the session runs on."""
    for item in reversed(path.messages):
        message = item.message
        if isinstance(message, AssistantMessage) and message.provider and message.model:
            return message.provider, message.model
    return None


def manual_target(
    info: ModelInfo | None, settings: ContextSettings, *, pinned_chars: int = 0
) -> int:
    """Tokens the history should fit in after a manual compaction (as the orchestrator budgets)."""
    known = info.context_window if info is not None else None
    if known is None and settings.context_window_limit is None:
        known = DEFAULT_WINDOW_TOKENS
    window, reserve = window_and_reserve(
        context_window=known,
        max_output_tokens=info.max_output_tokens if info is not None else None,
        settings=settings,
    ) or (DEFAULT_WINDOW_TOKENS, 0)
    budget = window - reserve
    pinned = int(pinned_chars / DEFAULT_CHARS_PER_TOKEN)
    return max(_MIN_TARGET, budget - pinned)


async def manual_request(
    bus: Caller,
    *,
    session_id: str,
    provider: str,
    model: str,
    settings: ContextSettings,
    path: MessagesResponse,
    principal: Principal | None = None,
) -> CompactRequest:
    """The ``compaction::compact`` request of a person's "compact now" for the session whose
    active path is ``path``, whether or not its history fits."""
    pinned = set(path.pinned)
    extra: list[str] = []
    if settings.pin_first_turn:  # carried whole by the orchestrator: not summarised either
        ids = [m.entry_id for m in path.messages]
        extra = [e for e in first_turn(ids, [m.message for m in path.messages]) if e not in pinned]
        pinned.update(extra)
    pinned_chars = sum(message_chars(m.message) for m in path.messages if m.entry_id in pinned)
    info = await _model_info(bus, provider, model)
    return CompactRequest(
        session_id=session_id,
        provider=provider,
        model=model,
        target_tokens=manual_target(info, settings, pinned_chars=pinned_chars),
        keep_last=settings.keep_last,
        pinned=extra,
        chars_per_token=DEFAULT_CHARS_PER_TOKEN,
        reason="manual",
        principal=principal,
    )


async def compact_now(
    bus: Caller,
    *,
    session_id: str,
    provider: str,
    model: str,
    settings: ContextSettings,
    principal: Principal | None = None,
    timeout: float = COMPACT_TIMEOUT,
) -> CompactResponse:
    """Compact ``session_id`` now (:func:`manual_request`). Failures are the bus's
    (``session_not_found`` from the sessions worker, the compactor's own codes)."""
    path = await MESSAGES.call(bus, MessagesRequest(session_id=session_id))
    request = await manual_request(
        bus,
        session_id=session_id,
        provider=provider,
        model=model,
        settings=settings,
        path=path,
        principal=principal,
    )
    return await COMPACT.call(bus, request, timeout=timeout)


async def _model_info(bus: Caller, provider: str, model: str) -> ModelInfo | None:
    try:
        return await MODELS_GET.call(bus, GetRequest(provider=provider, model=model), timeout=5.0)
    except (EngineError, ValidationError):
        return None
