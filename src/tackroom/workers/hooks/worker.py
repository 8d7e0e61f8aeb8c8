"""The ``hooks`` worker: ``hook-fanout::publish_collect``, ``::subscribe``, ``::unsubscribe``,
``::list``. Payloads and codes are in ``contracts``; merge rules in ``fanout``."""

from __future__ import annotations

from typing import Any

from tackroom.contracts import hooks as c
from tackroom.kit.cas import CasConfig
from tackroom.runtime.worker import WorkerContext, WorkerSpec
from tackroom.workers.hooks.fanout import publish
from tackroom.workers.hooks.subscriptions import SubscriptionStore

__all__ = ["WORKER", "HooksConfig"]


class HooksConfig(CasConfig):
    """``max_attempts`` at each subscription write."""


async def _start(ctx: WorkerContext[HooksConfig]) -> None:
    store = SubscriptionStore(ctx.engine, max_attempts=ctx.config.max_attempts)

    async def trigger(function_id: str, payload: Any, timeout: float) -> Any:
        return await ctx.engine.trigger(function_id, payload, timeout=timeout)

    async def publish_collect(request: c.PublishRequest) -> c.PublishResult:
        subscriptions = await store.get(request.topic)
        return await publish(trigger, request, subscriptions.subscribers)

    async def subscribe(request: c.SubscribeRequest) -> c.TopicSubscriptions:
        return await store.subscribe(request.topic, request.function_id, request.priority)

    async def unsubscribe(request: c.UnsubscribeRequest) -> c.UnsubscribeResult:
        removed, left = await store.unsubscribe(request.topic, request.function_id)
        return c.UnsubscribeResult(removed=removed, subscriptions=left)

    async def list_topics(request: c.ListRequest) -> c.ListResponse:
        if request.topic is not None:
            found = await store.get(request.topic)
            topics = {request.topic: found.subscribers} if found.subscribers else {}
        else:
            topics = {t: s.subscribers for t, s in (await store.all()).items() if s.subscribers}
        return c.ListResponse(topics=topics)

    await ctx.serve(c.PUBLISH_COLLECT, publish_collect)
    await ctx.serve(c.SUBSCRIBE, subscribe)
    await ctx.serve(c.UNSUBSCRIBE, unsubscribe)
    await ctx.serve(c.LIST, list_topics)


WORKER = WorkerSpec(
    name="hooks",
    description="Hook fan-out: gates, transforms and observers on topics the turn publishes.",
    config_model=HooksConfig,
    start=_start,
)
