"""``complete``, booting the scripted provider (config section or Python), its status."""

from __future__ import annotations

from pathlib import Path

import pytest

from tackroom.contracts.messages import AssistantMessage, TextBlock
from tackroom.engine import Engine, open_engine
from tackroom.runtime import ConfigError, HarnessConfig, Host
from tackroom.testing import ScriptedProvider, ScriptTurn, collect_stream
from tackroom.testing.engines import MEMORY_URL
from tackroom.testing.scripted import Script, status_function
from tackroom.testing.scripted.worker import WORKER, ScriptedConfig
from tests.testing.helpers import request


async def test_complete_returns_the_message(engine: Engine) -> None:
    script = Script(
        [
            ScriptTurn.call("fs::read", {"path": "a"}, text="Reading."),
            ScriptTurn.fail("context_overflow", "too long"),
        ]
    )
    provider = ScriptedProvider(script)
    await provider.register(engine)
    raw = await engine.trigger("provider::scripted::complete", request().model_dump(mode="json"))
    message = AssistantMessage.model_validate(raw)
    assert message.content[0] == TextBlock(text="Reading.")
    assert [(c.id, c.tool_name, c.arguments) for c in message.function_calls()] == [
        ("call_1_0", "fs__read", {"path": "a"})
    ]
    assert (message.stop_reason, message.provider, message.model) == (
        "function_call",
        "scripted",
        "test-model",
    )

    failed = AssistantMessage.model_validate(
        await engine.trigger("provider::scripted::complete", request().model_dump(mode="json"))
    )
    assert (failed.stop_reason, failed.error_kind, failed.error_message) == (
        "error",
        "context_overflow",
        "too long",
    )
    provider.assert_consumed()

    extra = AssistantMessage.model_validate(
        await engine.trigger("provider::scripted::complete", request().model_dump(mode="json"))
    )
    assert extra.stop_reason == "error"
    assert extra.error_kind == "permanent"
    assert "call 3 was not expected" in (extra.error_message or "")
    assert len(provider.violations) == 1


async def test_status_function(engine: Engine) -> None:
    provider = ScriptedProvider(Script([ScriptTurn.say("a"), ScriptTurn.say("b")]), name="demo")
    await provider.register(engine)
    await collect_stream(engine, "demo", request())
    status = await engine.trigger(status_function("demo"))
    assert status == {
        "schema_version": 1,
        "calls": 1,
        "consumed": False,
        "violations": [],
        "remaining": [{"session_id": None, "turns": 1}],
    }
    await provider.unregister()
    assert not [f for f in await engine.list_functions() if f.worker == "demo"]


def config_with(section: dict[str, object]) -> HarnessConfig:
    return HarnessConfig(
        schema_version=1,
        engine=MEMORY_URL,
        workers=["scripted"],
        worker_config={"scripted": section},
    )


async def test_worker_boots_from_an_inline_script() -> None:
    config = config_with({"script": [{"text": "hello from config"}], "deltas": "whole"})
    async with Host.from_config(config) as host:
        stream = await collect_stream(host.engine, "scripted", request())
        assert stream.types == ["start", "text_delta", "usage", "stop", "done"]
        assert stream.text == "hello from config"
        status = await host.engine.trigger(status_function("scripted"))
        assert status["consumed"] is True


async def test_worker_boots_from_a_script_file(tmp_path: Path) -> None:
    path = tmp_path / "script.jsonl"
    path.write_text('{"text": "one two three"}\n')
    config = config_with({"script_path": str(path), "per_session": True, "deltas": 2})
    async with Host.from_config(config) as host:
        for session in ("a", "b"):
            stream = await collect_stream(host.engine, "scripted", request(session_id=session))
            assert stream.types.count("text_delta") == 2
            assert stream.text == "one two three"
        status = await host.engine.trigger(status_function("scripted"))
        assert status["consumed"] is True
        assert status["calls"] == 2


@pytest.mark.parametrize(
    ("section", "fragment"),
    [
        ({}, "exactly one of script"),
        ({"script": [], "script_path": "x.yaml"}, "exactly one of script"),
        ({"script": [{"text": "ok"}, {"tool_calls": [{}]}]}, "step 2"),
        ({"script": [], "per_sesion": True}, "per_sesion"),
    ],
)
def test_config_errors(section: dict[str, object], fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        Host.from_config(config_with(section))


def test_config_validates_directly() -> None:
    assert ScriptedConfig(script=[{"text": "x"}]).load_script().turns[0].text == "x"
    assert WORKER.name == "scripted"


async def test_worker_spec_boots_a_python_script() -> None:
    provider = ScriptedProvider(Script([ScriptTurn.say("from python")]))
    async with Host(engine=open_engine(MEMORY_URL), workers=[provider.worker_spec()]) as host:
        stream = await collect_stream(host.engine, "scripted", request())
        assert stream.text == "from python"
        infos = await host.engine.list_functions()
        assert {i.function_id for i in infos if i.worker == "scripted"} == {
            "provider::scripted::stream",
            "provider::scripted::complete",
            "provider::scripted::status",
        }
    provider.assert_consumed()
