"""``POST /v1/runs`` takes a model chain and a task tag (the body → ``run::start``)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest

from tackroom.cli.serve import serve_workers
from tackroom.contracts.gateway import RunBody
from tackroom.contracts.principal import Principal
from tackroom.contracts.turn import ModelRef
from tackroom.harness.wiring import served_config
from tackroom.runtime.config import HarnessConfig
from tackroom.workers.gateway.errors import ApiError
from tackroom.workers.gateway.runs import run_request
from tackroom.workers.gateway.settings import RunDefaults

OWNER = Principal(id="owner", method="token")


def _gateway(model: str | None) -> Any:
    return cast(Any, SimpleNamespace(config=SimpleNamespace(defaults=RunDefaults(model=model))))


def test_a_chain_and_a_task_reach_the_run_request() -> None:
    body = RunBody(
        prompt="hi", model="openai:gpt-5-mini -> anthropic:claude-haiku-4-5", task="code"
    )
    request = run_request(_gateway(None), body, principal=OWNER)
    assert (request.provider, request.model) == ("openai", "gpt-5-mini")
    assert request.fallbacks == [ModelRef(provider="anthropic", model="claude-haiku-4-5")]
    assert request.task == "code"


def test_the_default_model_may_be_a_chain() -> None:
    request = run_request(
        _gateway("ollama:qwen3 -> openai:gpt-5-mini"), RunBody(prompt="hi"), principal=OWNER
    )
    assert (request.provider, request.model) == ("ollama", "qwen3")
    assert [str(ref) for ref in request.fallbacks] == ["openai:gpt-5-mini"]


def test_a_broken_chain_is_a_422_naming_the_field() -> None:
    with pytest.raises(ApiError) as caught:
        run_request(
            _gateway(None),
            RunBody(prompt="hi", model="openai:gpt-5-mini -> nope"),
            principal=OWNER,
        )
    assert caught.value.status == 422
    assert "PROVIDER:MODEL" in str(caught.value)


def test_tackroom_serve_boots_the_chain_and_route_providers() -> None:
    config = HarnessConfig.model_validate(
        {
            "schema_version": 1,
            "agent": {
                "model": "openai:gpt-5-mini -> anthropic:claude-haiku-4-5",
                "routes": {"cheap": "ollama:qwen3 -> scripted:demo"},
            },
        }
    )
    workers = serve_workers(config)
    assert {"openai", "anthropic", "scripted"} <= set(workers)
    orchestrator = served_config(config, workers).worker_config["orchestrator"] or {}
    assert orchestrator["routes"] == {"cheap": "ollama:qwen3 -> scripted:demo"}
