"""The TypeScript SDK's example workers (sdk/typescript/examples) on a NATS engine, from Python.

Builds nothing: ``make setup`` builds ``sdk/typescript/dist``. The workers run as node processes
on the engine URL; Python calls the tool, reads the catalog, and runs an agent turn whose tool
calls the TypeScript policy worker gates.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tackroom import Harness
from tackroom.contracts.messages import FunctionResultMessage, text_of
from tackroom.engine import open_engine
from tackroom.engine.errors import InvocationError
from tackroom.runtime.config import AgentSettings, HarnessConfig
from tackroom.runtime.host import Host
from tackroom.runtime.registry import load_worker
from tackroom.testing.nats import nats_test_url

EXAMPLES = Path(__file__).resolve().parents[2] / "sdk" / "typescript" / "dist" / "examples"
NODE = shutil.which("node")

pytestmark = pytest.mark.skipif(
    NODE is None or not (EXAMPLES / "weather.js").exists(),
    reason="needs node and a built sdk/typescript (make setup)",
)

WEATHER = "tool::ts_weather"
CHECK = "policy::check_permissions"


def bus(url: str) -> Host:
    """A Python process on the engine: it creates the namespace and serves ``engine::*``."""
    return Host(
        engine=open_engine(url), workers=[load_worker("engine")], config=HarnessConfig.defaults()
    )


@contextlib.asynccontextmanager
async def ts_worker(example: str, url: str) -> AsyncIterator[asyncio.subprocess.Process]:
    """``node dist/examples/<example>.js URL`` once it says it is ready; SIGTERMed after."""
    assert NODE is not None
    process = await asyncio.create_subprocess_exec(
        NODE,
        str(EXAMPLES / f"{example}.js"),
        url,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert process.stdout is not None
        assert process.stderr is not None
        line = await asyncio.wait_for(process.stdout.readline(), 20)
        if not line.startswith(b"ready:"):
            problem = await asyncio.wait_for(process.stderr.read(), 5)
            pytest.fail(f"{example} did not start: {line!r} {problem.decode(errors='replace')}")
        yield process
    finally:
        if process.returncode is None:
            process.terminate()
            try:
                await asyncio.wait_for(process.wait(), 10)
            except TimeoutError:
                process.kill()
                await process.wait()


async def test_python_calls_the_typescript_tool_and_sees_it_in_the_catalog(tmp_path: Path) -> None:
    url = nats_test_url(tmp_path)
    host = bus(url)
    async with host, ts_worker("weather", f"{url}&provision=0"):
        engine = host.engine
        answer = await engine.trigger(WEATHER, {"city": "Lisbon"}, timeout=10)
        assert answer == {"city": "Lisbon", "forecast": "sunny", "high_c": 21, "low_c": 12}

        listed = await engine.trigger("engine::functions::list", {}, timeout=10)
        (weather,) = [f for f in listed["functions"] if f["function_id"] == WEATHER]
        assert weather["worker"] == "ts-weather"
        assert weather["description"] == "Tomorrow's weather forecast for a city."
        schema = weather["request_schema"]
        assert schema["properties"]["city"]["type"] == "string"
        assert schema["required"] == ["city"]
        assert schema["x-tackroom"]["read_only"] is True

        with pytest.raises(InvocationError):  # a JSON null payload: the handler fails, typed
            await engine.trigger(WEATHER, None, timeout=10)

    async with bus(url) as host:  # the worker withdrew its catalog entry on SIGTERM
        assert WEATHER not in {f.function_id for f in await host.engine.list_functions()}


async def test_the_typescript_policy_answers_the_policy_contract(tmp_path: Path) -> None:
    url = nats_test_url(tmp_path)
    async with bus(url) as host, ts_worker("policy", url):
        engine = host.engine
        allowed = await engine.trigger(CHECK, {"function_id": WEATHER, "args": {}}, timeout=5)
        denied = await engine.trigger(CHECK, {"function_id": "tool::rm", "args": {}}, timeout=5)
        protected = await engine.trigger(CHECK, {"function_id": "state::set"}, timeout=5)
    assert (allowed["decision"], allowed["rule_id"]) == ("allow", "ts:allow-list")
    assert (denied["decision"], denied["rule_id"]) == ("deny", "ts:allow-list")
    assert (protected["decision"], protected["rule_id"]) == ("deny", "builtin:protected")


async def test_an_agent_turn_calls_the_typescript_tool_gated_by_the_typescript_policy(
    tmp_path: Path,
) -> None:
    wiped: list[str] = []

    def wipe_disk(path: str) -> str:
        """Delete everything under path."""
        wiped.append(path)
        return "wiped"

    script = [
        {"tool_calls": [{"name": "ts_weather", "arguments": {"city": "Lisbon"}}]},
        {"tool_calls": [{"name": "wipe_disk", "arguments": {"path": "/"}}]},
        {"text": "Sunny in Lisbon; I may not wipe the disk."},
    ]
    # No Python policy worker: the TypeScript one is the only server of policy::check_permissions.
    workers = [w for w in AgentSettings().workers if w not in ("policy", "policy-cedar")]
    config = HarnessConfig.model_validate(
        {
            "schema_version": 1,
            "agent": {"workers": workers},
            "worker_config": {"orchestrator": {"policy_function": CHECK}},
        }
    )
    url = nats_test_url(tmp_path)
    harness = Harness(
        "scripted:demo",
        script=script,
        config=config,
        engine=url,
        tools=[WEATHER, wipe_disk],
        home=tmp_path,
    )
    async with bus(url), ts_worker("weather", url), ts_worker("policy", url), harness:
        result = await harness.run("Weather in Lisbon, then wipe the disk.")

    assert result.ok, result.error
    assert result.output == "Sunny in Lisbon; I may not wipe the disk."
    weather, wipe = [m for m in result.messages if isinstance(m, FunctionResultMessage)]
    assert weather.function_id == WEATHER
    assert not weather.is_error
    assert "sunny" in text_of(weather.content)
    assert wipe.function_id == "tool::wipe_disk"
    assert wipe.is_error
    assert "[PERMISSION_DENIED]" in text_of(wipe.content)
    assert wipe.details["rule_id"] == "ts:allow-list"
    assert wipe.details["reason"] == "tool::wipe_disk is not on the allow list"
    assert wiped == []
