"""Model chains, routes, the blocked stop and the provider profile cache (no model server)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tackroom.contracts.events import AgentEndData, ModelSwitch, ModelSwitchData, event_of
from tackroom.contracts.messages import Usage
from tackroom.contracts.turn import ModelRef, RunStartRequest, parse_model_chain
from tackroom.engine import Engine
from tackroom.harness.errors import UsageError
from tackroom.harness.wiring import agent_host_config, choose_model
from tackroom.runtime.config import HarnessConfig
from tackroom.testing import memory_engine
from tackroom.workers.orchestrator.modelcall import ProfileCache
from tackroom.workers.orchestrator.record import TurnRecord
from tackroom.workers.orchestrator.transition import EmitEvent, ModelCallBlocked, transition
from tackroom.workers.orchestrator.worker import OrchestratorConfig


def test_a_chain_reads_in_order() -> None:
    chain = parse_model_chain("openai:gpt-5-mini -> anthropic:claude-haiku-4-5 ->ollama:qwen3")
    assert [str(ref) for ref in chain] == [
        "openai:gpt-5-mini",
        "anthropic:claude-haiku-4-5",
        "ollama:qwen3",
    ]


@pytest.mark.parametrize("text", ["openai", "openai:gpt -> ", ":x", "a b:c"])
def test_a_bad_chain_says_what_to_write(text: str) -> None:
    with pytest.raises(ValueError, match="PROVIDER:MODEL"):
        parse_model_chain(text)


def test_the_facade_takes_a_chain() -> None:
    choice = choose_model(
        "openai:gpt-5-mini -> anthropic:claude-haiku-4-5",
        config=HarnessConfig.defaults(),
        scripted_ok=False,
    )
    assert (choice.provider, choice.model) == ("openai", "gpt-5-mini")
    assert choice.fallbacks == (ModelRef(provider="anthropic", model="claude-haiku-4-5"),)
    with pytest.raises(UsageError, match="model chain"):
        choose_model("openai:gpt -> nope", config=HarnessConfig.defaults(), scripted_ok=False)


def test_fallback_and_route_providers_boot_their_workers() -> None:
    config = HarnessConfig.model_validate(
        {"schema_version": 1, "agent": {"routes": {"local": "ollama:qwen3"}}}
    )
    booted = agent_host_config(config, provider="openai", fallbacks=["anthropic"])
    assert {"openai", "anthropic"} <= set(booted.workers)  # ollama is the openai worker's
    routes = (booted.worker_config["orchestrator"] or {})["routes"]
    assert routes == {"local": "ollama:qwen3"}


def test_routes_are_chains_in_the_orchestrator_config() -> None:
    config = OrchestratorConfig.model_validate({"routes": {"code": "a:x -> b:y"}})
    assert config.routes["code"] == [
        ModelRef(provider="a", model="x"),
        ModelRef(provider="b", model="y"),
    ]
    with pytest.raises(ValidationError, match="PROVIDER:MODEL"):
        OrchestratorConfig.model_validate({"routes": {"code": "nonsense"}})


def test_a_run_request_takes_fallbacks_and_a_task_tag() -> None:
    request = RunStartRequest.model_validate(
        {
            "session_id": "s",
            "provider": "openai",
            "model": "gpt-5-mini",
            "fallbacks": [{"provider": "anthropic", "model": "claude-haiku-4-5"}],
            "task": "code",
        }
    )
    assert request.fallbacks[0].provider == "anthropic"
    with pytest.raises(ValidationError):
        RunStartRequest(session_id="s", provider="p", model="m", task="not a tag")
    # A request written before fallbacks and tasks existed still reads.
    old = RunStartRequest.model_validate({"session_id": "s", "provider": "p", "model": "m"})
    assert (old.fallbacks, old.task) == ([], None)


def test_a_blocked_model_call_stops_with_a_typed_reason() -> None:
    record = TurnRecord(
        session_id="s1", run_id="r1", provider="p", model="m", state="assistant_streaming"
    )
    step = transition(
        record,
        ModelCallBlocked(
            "before_model_call", "banned word", blocked_by="hook::g::x", usage=Usage(cost_usd=0.5)
        ),
    )
    assert step.record.state == "stopped"
    assert step.record.stop_reason == "blocked"
    assert step.record.usage.cost_usd == 0.5
    (end,) = [e.data for e in step.effects if isinstance(e, EmitEvent) and e.type == "agent_end"]
    assert isinstance(end, AgentEndData)
    assert (end.state, end.stop_reason) == ("stopped", "blocked")
    assert end.error is not None
    assert end.error.kind == "blocked"
    assert end.error.message == "before_model_call hook (hook::g::x): banned word"


def test_model_switch_is_a_typed_event() -> None:
    data = ModelSwitchData(
        from_provider="a", from_model="x", to_provider="b", to_model="y",
        error_kind="transient", position=1,
    )  # fmt: skip
    event = event_of(session_id="s", run_id="r", event_id="r:t1:switch1", data=data)
    assert isinstance(event, ModelSwitch)
    assert event.model_dump(mode="json")["type"] == "model_switch"


@pytest.fixture
async def engine() -> object:
    async with memory_engine() as started:
        yield started


async def test_a_provider_without_a_profile_calls_tools_natively(engine: Engine) -> None:
    now = [0.0]
    cache = ProfileCache(engine, clock=lambda: now[0])
    assert await cache.tool_calling("scripted") == "native"
    calls: list[object] = []

    async def profile(payload: object) -> dict[str, str]:
        calls.append(payload)
        return {"provider": "scripted", "tool_calling": "text"}

    await engine.register_function("provider::scripted::profile", profile)
    assert await cache.tool_calling("scripted") == "native"  # not asked again at once
    now[0] = 60.0
    assert await cache.tool_calling("scripted") == "text"
    assert await cache.tool_calling("scripted") == "text"
    assert len(calls) == 1  # an answer is kept
