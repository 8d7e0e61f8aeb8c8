"""``HookSubscriptions``: who listens to which topic, known in memory, so a publisher skips a topic
nobody listens to without a round trip.

The map is loaded from the state scope ``SUBSCRIPTIONS_SCOPE`` and kept current by a state
trigger on that scope. Each instance registers its own trigger function (a state trigger
delivers each write to one replica of a function id, so replicas of one worker must not share
it). Use::

    subscriptions = HookSubscriptions(ctx.engine)
    await subscriptions.attach(ctx)                  # register, add the trigger, load
    ...
    result = await subscriptions.publish("after_function_call", {...})
    if result is not None and result.blocked: ...    # None: nobody listens, nothing was sent

A subscription made a moment ago is seen once its trigger is delivered (milliseconds); the hooks
worker itself always reads the subscriptions from state when it publishes.
"""

from __future__ import annotations

import logging
import os
import uuid
from typing import Any

from pydantic import ValidationError

from tackroom.contracts.hooks import (
    DEFAULT_MERGE_RULES,
    PUBLISH_COLLECT,
    SUBSCRIPTIONS_SCOPE,
    MergeRule,
    PublishRequest,
    PublishResult,
    TopicSubscriptions,
    watch_function_id,
)
from tackroom.engine.errors import EngineError
from tackroom.engine.protocol import Engine
from tackroom.runtime.worker import WorkerContext

__all__ = ["HookSubscriptions"]

_log = logging.getLogger("tackroom.hooks")

_SLACK_S = 5.0
"""Added to the publish call's own deadline, beyond the subscribers' deadlines."""


def _count(value: Any) -> int:
    """Subscribers in a stored value; a value this code cannot read counts as subscribed."""
    if value is None:
        return 0
    try:
        return len(TopicSubscriptions.model_validate(value).subscribers)
    except ValidationError:
        return 1


class HookSubscriptions:
    """The topic → subscriber-count map of one process, and a publish that skips empty topics."""

    scope = SUBSCRIPTIONS_SCOPE.name
    """The state scope to watch (add a state trigger on it to :meth:`on_change`)."""

    def __init__(self, engine: Engine, *, publish_function: str = PUBLISH_COLLECT.id) -> None:
        self._engine = engine
        self.publish_function = publish_function
        self._publish = PUBLISH_COLLECT.at(publish_function)
        self._counts: dict[str, int] = {}
        self._revisions: dict[str, int] = {}
        self.function_id: str | None = None

    # -- the map ---------------------------------------------------------------------------
    def has_subscribers(self, topic: str) -> bool:
        return self._counts.get(topic, 0) > 0

    def subscriber_count(self, topic: str) -> int:
        return self._counts.get(topic, 0)

    async def load(self) -> None:
        """Read the whole scope (one call); writes seen by :meth:`on_change` meanwhile stay."""
        for entry in await self._engine.list_state(self.scope):
            self._apply(entry.key, entry.value, entry.revision)

    async def on_change(self, payload: Any) -> None:
        """The state-trigger handler: ``{scope, key, event, new_value, revision, ...}``."""
        if not isinstance(payload, dict) or payload.get("scope") != self.scope:
            return
        key = payload.get("key")
        if not isinstance(key, str):
            return
        if payload.get("event") == "delete":
            self._counts[key] = 0
            return
        revision = payload.get("revision")
        self._apply(key, payload.get("new_value"), revision if isinstance(revision, int) else 0)

    def _apply(self, topic: str, value: Any, revision: int) -> None:
        if revision and revision < self._revisions.get(topic, 0):
            return  # an older write delivered after a newer one was loaded
        if revision:
            self._revisions[topic] = revision
        self._counts[topic] = _count(value)

    async def attach(self, ctx: WorkerContext[Any], *, function_id: str | None = None) -> str:
        """Register :meth:`on_change`, add the state trigger, then load; returns the function id.

        The default id is unique to this instance (:func:`watch_function_id` of the worker and
        ``<pid>-<hex>``) so every replica of the worker sees every change. Both are unregistered
        with the worker.
        """
        fid = function_id or watch_function_id(ctx.name, f"{os.getpid()}-{uuid.uuid4().hex[:8]}")
        await ctx.register_function(
            fid, self.on_change, description="Keeps a hook subscription map current."
        )
        await ctx.add_state_trigger(self.scope, fid)
        await self.load()
        self.function_id = fid
        return fid

    # -- publishing ------------------------------------------------------------------------
    async def publish(
        self,
        topic: str,
        payload: Any,
        *,
        merge_rule: MergeRule | None = None,
        timeout_ms: int = 5000,
    ) -> PublishResult | None:
        """Publish through the hooks worker; ``None`` (and no call) when nobody listens.

        ``merge_rule`` defaults to the topic's (:data:`DEFAULT_MERGE_RULES`, else ``observe``).
        If the publish call itself fails, a gate or transform comes back blocked (fail-closed,
        ``blocked_by`` = the publish function) and an observer with ``errors`` = subscribers.
        """
        count = self.subscriber_count(topic)
        if count <= 0:
            return None
        rule: MergeRule = merge_rule or DEFAULT_MERGE_RULES.get(topic, "observe")
        calls = count if rule == "transform" else 1
        try:
            request = PublishRequest(
                topic=topic, payload=payload, merge_rule=rule, timeout_ms=timeout_ms
            )
            return await self._publish.call(
                self._engine, request, timeout=calls * timeout_ms / 1000 + _SLACK_S
            )
        except (EngineError, ValidationError) as exc:
            _log.warning("hooks: publishing %s failed: %s", topic, exc)
            if rule == "observe":
                return PublishResult(
                    blocked=False, payload=payload, subscribers=count, errors=count
                )
            return PublishResult(
                blocked=True,
                reason=f"hooks unavailable: {exc}",
                blocked_by=self.publish_function,
                payload=payload if rule == "first_block_wins" else None,
                subscribers=count,
                errors=count,
            )
