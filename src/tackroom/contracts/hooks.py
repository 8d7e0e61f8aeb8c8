"""The public face of the ``hooks`` worker (``hook-fanout::*``): functions, payloads, codes.

A publisher (the orchestrator) calls :data:`PUBLISH_COLLECT`; the worker calls each subscriber
of the topic by function id with a :class:`HookEvent` and merges the replies
(:class:`HookReply`) by the publisher's merge rule. Subscriptions are state,
:data:`SUBSCRIPTIONS_SCOPE` (key = topic, value :class:`TopicSubscriptions`), written by
compare-and-set, so anyone can tell whether a topic has subscribers without a round trip (see
``tackroom.kit.hooks.publish.HookSubscriptions``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from tackroom.contracts._base import Strict as _Model
from tackroom.contracts.bus import Function, Scope
from tackroom.contracts.messages import AgentMessage, AssistantMessage
from tackroom.contracts.principal import Principal
from tackroom.contracts.provider import ToolSpec

__all__ = [
    "AFTER_FUNCTION_CALL",
    "AFTER_MODEL_CALL",
    "BEFORE_FUNCTION_CALL",
    "BEFORE_MODEL_CALL",
    "CONTENTION_ERROR",
    "DEFAULT_MERGE_RULES",
    "LIFECYCLE_HOOKS",
    "LIST",
    "MODEL_CALL_SCHEMA_VERSION",
    "PUBLISH_COLLECT",
    "SCHEMA_VERSION",
    "SUBSCRIBE",
    "SUBSCRIPTIONS_SCOPE",
    "TOPICS",
    "TOPIC_PATTERN",
    "TURN_END",
    "UNSUBSCRIBE",
    "AfterModelCall",
    "BeforeModelCall",
    "HookEvent",
    "HookReply",
    "ListRequest",
    "ListResponse",
    "MergeRule",
    "PublishRequest",
    "PublishResult",
    "SubscribeRequest",
    "Subscriber",
    "Topic",
    "TopicSubscriptions",
    "UnsubscribeRequest",
    "UnsubscribeResult",
    "hook_function",
    "watch_function_id",
]

SCHEMA_VERSION = 1

BEFORE_FUNCTION_CALL = "before_function_call"
AFTER_FUNCTION_CALL = "after_function_call"
BEFORE_MODEL_CALL = "before_model_call"
AFTER_MODEL_CALL = "after_model_call"
TURN_END = "turn_end"
TOPICS = (BEFORE_FUNCTION_CALL, AFTER_FUNCTION_CALL, BEFORE_MODEL_CALL, AFTER_MODEL_CALL, TURN_END)
"""The topics the orchestrator publishes; other topics work the same way for other publishers."""

LIFECYCLE_HOOKS: dict[str, str] = {
    "before_thinking": BEFORE_MODEL_CALL,
    "after_thinking": AFTER_MODEL_CALL,
    "before_acting": BEFORE_FUNCTION_CALL,
    "after_acting": AFTER_FUNCTION_CALL,
    "after_observing": AFTER_FUNCTION_CALL,
    "on_finished": TURN_END,
}
"""Seed 003's lifecycle points (IDLE → THINKING → ACTING → OBSERVING → FINISHED) → the topic
published there. THINKING is the model call; ACTING and OBSERVING are one function call and its
result (a subscriber of ``after_function_call`` may rewrite the result the model observes);
FINISHED is the ``turn_end`` of a turn with no function results — the model answered, or its
call stopped the run (``Harness.add_hook`` calls an ``on_finished`` subscriber for those only).
ERROR has no topic: a failing run publishes no hook."""

MergeRule = Literal["first_block_wins", "transform", "observe"]

DEFAULT_MERGE_RULES: dict[str, MergeRule] = {
    BEFORE_FUNCTION_CALL: "first_block_wins",
    AFTER_FUNCTION_CALL: "transform",
    BEFORE_MODEL_CALL: "transform",
    AFTER_MODEL_CALL: "transform",
    TURN_END: "observe",
}
"""The merge rule each orchestrator topic is published with."""

CONTENTION_ERROR = "contention"
"""A subscription write lost its compare-and-set too many times in a row; nothing was written."""

TOPIC_PATTERN = r"^[A-Za-z0-9_.:-]{1,128}$"
Topic = Annotated[str, StringConstraints(pattern=TOPIC_PATTERN)]
FunctionId = Annotated[str, StringConstraints(min_length=1, max_length=512)]


# -- state -----------------------------------------------------------------------------------


class Subscriber(_Model):
    function_id: str
    priority: int = Field(
        default=0, description="lower runs first (ties by function_id); may be negative"
    )


class TopicSubscriptions(_Model):
    """The value stored at ``hook-subscriptions/<topic>``, subscribers in call order."""

    schema_version: int = SCHEMA_VERSION
    subscribers: list[Subscriber] = Field(default_factory=list)


# -- what a subscriber gets and answers --------------------------------------------------------


class HookEvent(_Model):
    """The payload a subscriber function is triggered with."""

    schema_version: int = SCHEMA_VERSION
    topic: str
    payload: Any = None


class HookReply(BaseModel):
    """What a subscriber returns (``null`` or ``{}``: nothing to say).

    ``block: true`` blocks (``first_block_wins`` and ``transform``; ignored by ``observe``);
    ``payload`` replaces the payload for the next subscriber (``transform`` only).
    """

    model_config = ConfigDict(extra="ignore", defer_build=True)

    block: bool = False
    reason: str | None = None
    payload: Any = None


# -- the payloads of the model-call topics -----------------------------------------------------

MODEL_CALL_SCHEMA_VERSION = 1


class _ModelCall(_Model):
    """What a model-call hook's payload names: the call's session, run, turn and model."""

    schema_version: int = MODEL_CALL_SCHEMA_VERSION
    session_id: str
    run_id: str
    turn: int
    provider: str
    model: str


class BeforeModelCall(_ModelCall):
    """``before_model_call``'s payload: the request about to be sent. A subscriber may block it
    or ``replace`` it with this model changed (``system_prompt``, ``messages``, ``tools``,
    ``max_output_tokens``, ``temperature``); the ids, ``provider`` and ``model`` are read-only
    (a hook that changes them blocks the call: choose models with routes, not hooks)."""

    system_prompt: str = ""
    messages: list[AgentMessage]
    tools: list[ToolSpec] = Field(default_factory=list)
    max_output_tokens: int | None = None
    temperature: float | None = None


class AfterModelCall(_ModelCall):
    """``after_model_call``'s payload: the model's answer before it is stored. A subscriber may
    block it (the run stops, the answer is dropped) or ``replace`` it with ``message`` changed
    (redacted); the message's ``usage``, ``provider`` and ``model`` are kept as the provider
    reported them."""

    message: AssistantMessage
    principal: Principal | None = Field(
        default=None, description="who the run acts for (read-only: what usage is charged to)"
    )


# -- hook-fanout::* --------------------------------------------------------------------------


class PublishRequest(_Model):
    topic: Topic
    payload: Any = None
    merge_rule: MergeRule
    timeout_ms: int = Field(
        default=5000, ge=1, le=300_000, description="deadline of each subscriber call"
    )


class PublishResult(_Model):
    schema_version: int = SCHEMA_VERSION
    blocked: bool
    reason: str | None = None
    blocked_by: str | None = Field(default=None, description="the subscriber that blocked")
    payload: Any = Field(
        description="the payload after the merge; null when a transform is blocked, so a "
        "result a failed redactor should have changed never leaks"
    )
    subscribers: int = Field(description="subscribers of the topic when it was published")
    errors: int = Field(default=0, description="subscribers that failed or timed out")


class SubscribeRequest(_Model):
    topic: Topic
    function_id: FunctionId
    priority: int = 0


class UnsubscribeRequest(_Model):
    topic: Topic
    function_id: FunctionId


class UnsubscribeResult(_Model):
    schema_version: int = SCHEMA_VERSION
    removed: bool
    subscriptions: TopicSubscriptions


class ListRequest(_Model):
    topic: Topic | None = None


class ListResponse(_Model):
    schema_version: int = SCHEMA_VERSION
    topics: dict[str, list[Subscriber]] = Field(
        description="topic → subscribers in call order; topics with none are absent"
    )


# -- the functions and the state -------------------------------------------------------------

PUBLISH_COLLECT: Function[PublishRequest, PublishResult] = Function(
    "hook-fanout::publish_collect",
    PublishRequest,
    PublishResult,
    description="Call a topic's subscribers and merge their replies (first_block_wins, "
    "transform, observe); a failing gate or transform blocks.",
    hop=True,
)
"""The orchestrator calls it under its configured ``hooks_function`` id (``.at(id)``)."""
SUBSCRIBE: Function[SubscribeRequest, TopicSubscriptions] = Function(
    "hook-fanout::subscribe",
    SubscribeRequest,
    TopicSubscriptions,
    description="Subscribe a function to a topic (idempotent; a new priority moves it).",
)
UNSUBSCRIBE: Function[UnsubscribeRequest, UnsubscribeResult] = Function(
    "hook-fanout::unsubscribe",
    UnsubscribeRequest,
    UnsubscribeResult,
    description="Remove a function from a topic's subscribers.",
)
LIST: Function[ListRequest, ListResponse] = Function(
    "hook-fanout::list",
    ListRequest,
    ListResponse,
    description="Subscribers by topic, in call order.",
)

SUBSCRIPTIONS_SCOPE: Scope[TopicSubscriptions] = Scope("hook-subscriptions", TopicSubscriptions)
"""State scope of the subscriptions: key = topic, value :class:`TopicSubscriptions`; a topic with
no subscriber has no key."""


def hook_function(worker: str, name: str) -> Function[HookEvent, HookReply | None]:
    """``hook::<worker>::<name>``: where ``tackroom.hooks.hook`` registers a subscriber, which
    the hooks worker calls with a :class:`HookEvent` and reads a :class:`HookReply` (or null)
    from."""
    return Function(f"hook::{worker}::{name}", HookEvent, HookReply | None)


def watch_function_id(worker: str, instance: str) -> str:
    """The state-trigger function through which one process's ``HookSubscriptions`` watches
    :data:`SUBSCRIPTIONS_SCOPE` (unique per instance, so every replica sees every write)."""
    return f"hook-fanout::watch::{worker}::{instance}"
