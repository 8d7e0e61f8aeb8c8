"""A mistyped model is refused before the run, with the catalog's nearest names.

``models::check`` on the shipped catalog, and the facade's helper over the bus: only providers
whose catalog is authoritative (OpenAI, Anthropic) refuse; local servers take any model.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tackroom import Harness
from tackroom.contracts.catalog import MODELS_CHECK, CheckRequest, CheckResponse
from tackroom.engine import Engine, open_engine
from tackroom.harness.errors import UsageError
from tackroom.harness.modelcheck import is_typo_of, unknown_model_problem
from tackroom.runtime import HarnessConfig, Host
from tackroom.testing import memory_engine
from tackroom.testing.engines import MEMORY_URL
from tackroom.workers.catalog.worker import WORKER as CATALOG


@pytest.fixture
async def bus() -> AsyncIterator[Engine]:
    config = HarnessConfig(schema_version=1, worker_config={"catalog": {}})
    async with Host(engine=open_engine(MEMORY_URL), workers=[CATALOG], config=config) as host:
        yield host.engine


async def check(bus: Engine, provider: str, model: str) -> CheckResponse:
    return await MODELS_CHECK.call(bus, CheckRequest(provider=provider, model=model))


async def test_a_typo_of_an_openai_model_is_refused_with_the_nearest_name(bus: Engine) -> None:
    reply = await check(bus, "openai", "gpt-5-mni")
    assert (reply.known, reply.authoritative, reply.suggestions) == (False, True, ["gpt-5-mini"])
    problem = await unknown_model_problem(bus, "openai", "gpt-5-mni")
    assert problem is not None
    assert problem.startswith("unknown model gpt-5-mni for openai; did you mean gpt-5-mini? (")
    assert "check_model=False" in problem


async def test_an_anthropic_typo_is_refused_too(bus: Engine) -> None:
    problem = await unknown_model_problem(bus, "anthropic", "claude-sonet-4-5")
    assert problem is not None
    assert problem.startswith(
        "unknown model claude-sonet-4-5 for anthropic; did you mean claude-sonnet-4-5?"
    )


async def test_another_version_number_is_taken_as_a_newer_model_not_a_typo(bus: Engine) -> None:
    reply = await check(bus, "openai", "gpt-5.3")
    assert reply.suggestions == ["gpt-5.1", "gpt-5.2", "gpt-5.4"]
    assert await unknown_model_problem(bus, "openai", "gpt-5.3") is None
    assert await unknown_model_problem(bus, "anthropic", "claude-opus-4-9") is None


async def test_a_name_like_nothing_listed_goes_ahead(bus: Engine) -> None:
    assert await unknown_model_problem(bus, "openai", "totally-made-up") is None
    assert await unknown_model_problem(bus, "openai", "gpt-3.5-turbo") is None


@pytest.mark.parametrize(
    ("name", "listed", "typo"),
    [
        ("gpt-5-mni", "gpt-5-mini", True),
        ("gpt5-mini", "gpt-5-mini", True),
        ("claude-sonet-4-5", "claude-sonnet-4-5", True),
        ("gpt-5.3", "gpt-5.1", False),
        ("claude-opus-4-2", "claude-opus-4-1", False),
        ("gpt-5-codex", "gpt-5-mini", False),
    ],
)
def test_what_counts_as_a_typo(name: str, listed: str, typo: bool) -> None:
    assert is_typo_of(name, listed) is typo


@pytest.mark.parametrize(
    ("provider", "model"),
    [
        ("openai", "gpt-5-mini"),
        ("openai", "gpt-4o-2024-08-06"),  # an alias
        ("anthropic", "claude-sonnet-4-5-20250929"),
    ],
)
async def test_a_listed_model_passes(bus: Engine, provider: str, model: str) -> None:
    assert (await check(bus, provider, model)).known
    assert await unknown_model_problem(bus, provider, model) is None


@pytest.mark.parametrize(
    ("provider", "model"),
    [
        ("ollama", "qwen3"),  # a local server serves whatever it has pulled
        ("vllm", "my-finetune"),
        ("openrouter", "meta-llama/llama-4-maverick"),  # an open-ended list
        ("mybox", "house-model"),  # a provider the catalog does not know
        ("openai", "gpt-4o-2024-05-13"),  # a dated snapshot of a listed model may exist
        ("Not A Provider!", "x"),  # not even a provider name: the run reports it
    ],
)
async def test_the_catalog_cannot_tell_so_the_run_goes_ahead(
    bus: Engine, provider: str, model: str
) -> None:
    assert await unknown_model_problem(bus, provider, model) is None


async def test_without_a_catalog_worker_nothing_is_refused() -> None:
    async with memory_engine() as engine:
        assert await unknown_model_problem(engine, "openai", "gpt-5-mni") is None


async def test_a_catalog_that_fails_refuses_nothing() -> None:
    async def broken(payload: Any) -> Any:
        raise RuntimeError("the catalog is down")

    async with memory_engine() as engine:
        await engine.register_function(MODELS_CHECK.id, broken)
        assert await unknown_model_problem(engine, "openai", "gpt-5-mni") is None


async def test_a_mistyped_fallback_is_refused_before_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-not-used")
    harness = Harness(
        "scripted:demo -> anthropic:claude-sonet-4-5", script=[{"text": "hi"}], home=tmp_path
    )
    async with harness:
        with pytest.raises(UsageError, match="did you mean claude-sonnet-4-5"):
            await harness.run("hello")
