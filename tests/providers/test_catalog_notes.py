"""A profile the model catalog does not list is said once per model, not on every run."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from tackroom.contracts.messages import AssistantMessage
from tackroom.engine import Engine
from tackroom.runtime.worker import WorkerContext
from tackroom.testing.fake_llm import FakeOpenAIServer, Reply
from tackroom.workers.catalog.worker import WORKER as CATALOG
from tackroom.workers.catalog.worker import CatalogConfig
from tests.providers.helpers import FakeTime, boot, request

LOGGER = "tackroom.providers"


@asynccontextmanager
async def catalog(engine: Engine) -> AsyncIterator[None]:
    ctx: WorkerContext[Any] = WorkerContext(engine=engine, name="catalog", config=CatalogConfig())
    await CATALOG.start(ctx)
    try:
        yield
    finally:
        await ctx.close()


async def complete(engine: Engine, provider: str, model: str) -> AssistantMessage:
    payload = request(model=model).model_dump(mode="json")
    reply = await engine.trigger(f"provider::{provider}::complete", payload)
    return AssistantMessage.model_validate(reply)


def notes(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == LOGGER and r.levelno == level and "catalog" in r.getMessage()
    ]


async def test_a_custom_profile_is_noted_once_per_model(
    engine: Engine, openai_server: FakeOpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    openai_server.default = Reply.say("ok")
    time = FakeTime()
    async with catalog(engine), boot(engine, "openai", openai_server, name="mybox", time=time):
        for _ in range(3):
            assert (await complete(engine, "mybox", "house-model")).stop_reason == "end"
            time.now += 3600  # past every cache: the catalog is asked again
        await complete(engine, "mybox", "other-model")
    warnings = notes(caplog, logging.WARNING)
    assert len(warnings) == 2, warnings  # one per model, not one per run
    assert "provider mybox, model house-model: no provider 'mybox'" in warnings[0]
    assert "catalog: false" in warnings[0]  # says how to silence it
    assert "other-model" in warnings[1]
    assert len(notes(caplog, logging.DEBUG)) == 2  # the repeats, asked after the cache expired


async def test_a_profile_that_opts_out_of_the_catalog_never_asks(
    engine: Engine, openai_server: FakeOpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    openai_server.default = Reply.say("ok")
    asked: list[Any] = []

    async def models_get(payload: Any) -> Any:
        asked.append(payload)
        raise AssertionError("a profile with catalog: false asked the catalog")

    await engine.register_function("models::get", models_get)
    profile = {"catalog": False}
    async with boot(engine, "openai", openai_server, name="mybox", profile=profile):
        message = await complete(engine, "mybox", "house-model")
    assert message.stop_reason == "end"
    assert message.usage.cost_usd == 0
    assert asked == []
    assert notes(caplog, logging.WARNING) == []
