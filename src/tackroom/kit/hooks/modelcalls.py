"""``before_model_call`` and ``after_model_call``: hooks that may block or rewrite a model call.

Both topics are published with the ``transform`` merge rule: subscribers run in turn, each
sees the payload the previous one returned, and one that blocks, fails or times out stops the
call (fail-closed). A topic nobody subscribes to costs nothing: the subscription map is in
memory, so no payload is built and nothing is sent.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TypeVar

from pydantic import ValidationError

from tackroom.contracts.hooks import (
    AFTER_MODEL_CALL,
    BEFORE_MODEL_CALL,
    AfterModelCall,
    BeforeModelCall,
    PublishResult,
)
from tackroom.contracts.messages import AssistantMessage, Usage
from tackroom.contracts.principal import Principal
from tackroom.contracts.provider import ProviderRequest
from tackroom.kit.hooks.publish import HookSubscriptions
from tackroom.runtime.typed import describe_validation_error

__all__ = ["HookBlocked", "ModelCallHooks"]


@dataclass(frozen=True, slots=True)
class HookBlocked:
    """A model-call hook stopped the call: the run ends with ``stop_reason == "blocked"``."""

    topic: str
    reason: str
    blocked_by: str | None = None
    usage: Usage = field(default_factory=Usage)
    """What the blocked call spent (an answer ``after_model_call`` refused was paid for)."""


@dataclass(frozen=True, slots=True)
class CallIds:
    session_id: str
    run_id: str
    turn: int
    provider: str
    model: str
    principal: Principal | None = None


class ModelCallHooks:
    def __init__(self, hooks: HookSubscriptions | None) -> None:
        self._hooks = hooks

    def listening(self, topic: str) -> bool:
        return self._hooks is not None and self._hooks.has_subscribers(topic)

    async def before(self, ids: CallIds, request: ProviderRequest) -> ProviderRequest | HookBlocked:
        """The request as the hooks left it, or why they blocked it."""
        if self._hooks is None or not self._hooks.has_subscribers(BEFORE_MODEL_CALL):
            return request
        payload = BeforeModelCall(
            session_id=ids.session_id,
            run_id=ids.run_id,
            turn=ids.turn,
            provider=ids.provider,
            model=ids.model,
            system_prompt=request.system_prompt,
            messages=request.messages,
            tools=request.tools,
            max_output_tokens=request.max_output_tokens,
            temperature=request.temperature,
        )
        result = await self._hooks.publish(BEFORE_MODEL_CALL, payload.model_dump(mode="json"))
        if result is None:
            return request
        changed = _validated(BEFORE_MODEL_CALL, BeforeModelCall, result)
        if isinstance(changed, HookBlocked):
            return changed
        if _ids_of(changed) != _ids_of(payload):
            return HookBlocked(
                BEFORE_MODEL_CALL,
                "a before_model_call hook changed the session, run, turn, provider or model;"
                " those are read-only (choose models with routes)",
                result.blocked_by,
            )
        return request.model_copy(
            update={
                "system_prompt": changed.system_prompt,
                "messages": changed.messages,
                "tools": changed.tools,
                "max_output_tokens": changed.max_output_tokens,
                "temperature": changed.temperature,
            }
        )

    async def after(
        self, ids: CallIds, message: AssistantMessage
    ) -> AssistantMessage | HookBlocked:
        """The answer as the hooks left it (usage, provider and model kept), or why they
        blocked it."""
        if self._hooks is None or not self._hooks.has_subscribers(AFTER_MODEL_CALL):
            return message
        payload = AfterModelCall(
            session_id=ids.session_id,
            run_id=ids.run_id,
            turn=ids.turn,
            provider=ids.provider,
            model=ids.model,
            message=message,
            principal=ids.principal,
        )
        result = await self._hooks.publish(AFTER_MODEL_CALL, payload.model_dump(mode="json"))
        if result is None:
            return message
        changed = _validated(AFTER_MODEL_CALL, AfterModelCall, result)
        if isinstance(changed, HookBlocked):
            return replace(changed, usage=message.usage)
        return changed.message.model_copy(
            update={"usage": message.usage, "provider": message.provider, "model": message.model}
        )


_Payload = TypeVar("_Payload", BeforeModelCall, AfterModelCall)


def _validated(topic: str, model: type[_Payload], result: PublishResult) -> _Payload | HookBlocked:
    if result.blocked:
        return HookBlocked(topic, result.reason or "blocked by a hook", result.blocked_by)
    try:
        return model.model_validate(result.payload)
    except ValidationError as exc:
        return HookBlocked(
            topic,
            f"a {topic} hook answered a payload that is not a {model.__name__}: "
            f"{describe_validation_error(exc)}",
            result.blocked_by,
        )


def _ids_of(payload: BeforeModelCall) -> tuple[str, str, int, str, str]:
    return (payload.session_id, payload.run_id, payload.turn, payload.provider, payload.model)
