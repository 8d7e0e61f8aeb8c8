"""The ``http-functions`` bridge against a function host written in JavaScript (node, no
dependencies: ``tests/fixtures/http_functions/server.mjs``), on both engine backends.

A configured function is in the catalog with its schemas and traits; a call reaches the endpoint
with the call context; a 503 is retried for an idempotent function and reported once otherwise;
a slow endpoint is a typed ``timeout`` within its ``timeout_seconds``; a 400 is a typed error with
the remote's code and message; the Authorization header (from an environment variable) reaches
the server and never a log line, an error or the catalog; and a scripted agent's turn calls the
HTTP-hosted tool and answers with its result.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import shutil
import subprocess
import time
import urllib.request
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tackroom import Harness
from tackroom.contracts.messages import FunctionResultMessage, text_of
from tackroom.contracts.tools import TRANSIENT_ERROR_CODES, traits_of
from tackroom.engine import Engine, InvocationError, open_engine
from tackroom.runtime import Host
from tackroom.runtime.config import HarnessConfig
from tackroom.runtime.registry import load_worker
from tackroom.testing.backends import BACKENDS, engine_url_for

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="node is missing")

SERVER = Path(__file__).resolve().parents[2] / "fixtures" / "http_functions" / "server.mjs"
TOKEN = "tk-" + os.urandom(12).hex()
"""The secret: in the server's environment, and in the bridge's as FN_TOKEN."""
AUTH = {"Authorization": "Bearer ${FN_TOKEN}"}
CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def call(call_id: str, **arguments: Any) -> dict[str, Any]:
    """A payload as the orchestrator sends it: the arguments and the call context."""
    context = {"session_id": "s-1", "function_call_id": call_id, "run_id": "r-1"}
    return {**arguments, "_call": context}


class Server:
    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}"

    def url(self, path: str) -> str:
        return self.base + path

    async def received(self, path: str) -> list[dict[str, Any]]:
        def get() -> list[dict[str, Any]]:
            with urllib.request.urlopen(self.url("/requests"), timeout=5) as answer:
                return [r for r in json.loads(answer.read()) if r["path"] == path]

        return await asyncio.to_thread(get)


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    with subprocess.Popen(  # its exit closes the stdout pipe
        ["node", str(SERVER), "0"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "EXPECTED_TOKEN": TOKEN},
    ) as process:
        try:
            assert process.stdout is not None
            line = process.stdout.readline()
            assert line.startswith("listening "), line
            yield Server(int(line.split()[1]))
        finally:
            process.terminate()
            process.wait(timeout=10)


def functions(server: Server, closed_port: int) -> list[dict[str, Any]]:
    return [
        {
            "id": "tool::weather",
            "url": server.url("/weather"),
            "description": "Today's weather in a city.",
            "request_schema": CITY,
            "response_schema": {"type": "object", "required": ["forecast", "temperature_c"]},
            "headers": AUTH,
            "read_only": True,
            "timeout_seconds": 5,
        },
        {"id": "tool::flaky", "url": server.url("/flaky"), "idempotent": True, "retries": 2},
        {"id": "tool::flaky_once", "url": server.url("/flaky"), "retries": 2},
        {"id": "tool::slow", "url": server.url("/slow"), "timeout_seconds": 0.5},
        {"id": "tool::invalid", "url": server.url("/invalid")},
        {"id": "tool::private", "url": server.url("/private"), "headers": AUTH},
        {"id": "tool::leaky", "url": server.url("/leaky"), "headers": AUTH},
        {
            "id": "tool::misshapen",  # /weather's answer lacks what this schema demands
            "url": server.url("/weather"),
            "response_schema": {"type": "object", "required": ["humidity"]},
        },
        {
            "id": "tool::unset",
            "url": server.url("/private"),
            "headers": {"X-Key": "${NO_SUCH_VAR_9}"},
        },
        {
            "id": "tool::refused",
            "url": f"http://127.0.0.1:{closed_port}/nothing",
            "idempotent": True,
            "retries": 1,
        },
    ]


def harness_config(server: Server, closed_port: int) -> dict[str, Any]:
    return {
        "http-functions": {
            "functions": functions(server, closed_port),
            "backoff_initial": 0.05,
            "backoff_max": 0.2,
        }
    }


def free_closed_port() -> int:
    from tackroom.testing.nats import free_port

    return free_port()  # nothing listens there once the probe socket is closed


@pytest.fixture(params=list(BACKENDS))
async def bus(
    request: pytest.FixtureRequest,
    server: Server,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[Engine]:
    monkeypatch.setenv("FN_TOKEN", TOKEN)
    monkeypatch.delenv("NO_SUCH_VAR_9", raising=False)
    config = HarnessConfig.model_validate(
        {"schema_version": 1, "worker_config": harness_config(server, free_closed_port())}
    )
    engine = open_engine(engine_url_for(request.param, tmp_path))
    workers = [load_worker("http-functions")]
    async with Host(engine=engine, workers=workers, config=config) as host:
        yield host.engine


async def fails(bus: Engine, function_id: str, payload: dict[str, Any]) -> InvocationError:
    with pytest.raises(InvocationError) as caught:
        await bus.trigger(function_id, payload, timeout=20)
    return caught.value


async def test_each_function_is_in_the_catalog_with_its_schemas_and_traits(bus: Engine) -> None:
    catalog = {info.function_id: info for info in await bus.list_functions()}
    weather = catalog["tool::weather"]
    assert weather.worker == "http-functions"
    assert weather.description == "Today's weather in a city."
    schema = weather.request_schema or {}
    assert schema["properties"] == CITY["properties"]
    assert schema["required"] == ["city"]
    assert weather.response_schema == {"type": "object", "required": ["forecast", "temperature_c"]}
    traits = traits_of(schema)
    assert (traits.read_only, traits.idempotent, traits.parallel) == (True, True, True)
    assert traits.timeout is not None
    assert traits.timeout >= 3 * 5  # every attempt may take its timeout, and the pauses

    once = traits_of(catalog["tool::flaky_once"].request_schema)
    assert (once.read_only, once.idempotent, once.parallel) == (False, False, False)
    assert once.timeout == 30 + 2.0  # one attempt, no retry
    listed = json.dumps(
        [[i.description, i.request_schema, i.response_schema] for i in catalog.values()]
    )
    assert TOKEN not in listed
    assert "${FN_TOKEN}" not in listed  # not even the header's template


async def test_a_call_posts_its_arguments_and_call_context(bus: Engine, server: Server) -> None:
    answer = await bus.trigger("tool::weather", call("w-1", city="Paris"), timeout=20)
    assert answer == {
        "city": "Paris",
        "forecast": "sunny in Paris",
        "temperature_c": 21,
        "call_id": "w-1",
    }
    bare = await bus.trigger("tool::weather", {"city": "Rome"}, timeout=20)  # no call context
    assert (bare["forecast"], bare["call_id"]) == ("sunny in Rome", None)
    error = await fails(bus, "tool::weather", call("w-2", town="Paris"))
    assert error.remote_code == "invalid_request"
    assert "'city' is a required property" in error.message
    assert await server.received("/weather") != []

    misshapen = await fails(bus, "tool::misshapen", call("w-3", city="Oslo"))
    assert misshapen.remote_code == "invalid_response"
    assert "'humidity' is a required property" in misshapen.message


async def test_a_503_is_retried_for_an_idempotent_function(bus: Engine, server: Server) -> None:
    call_id = f"flaky-{uuid.uuid4()}"
    answer = await bus.trigger("tool::flaky", call(call_id), timeout=20)
    assert answer == {"ok": True, "key": call_id}
    assert [r["call_id"] for r in await server.received("/flaky")].count(call_id) == 2

    once = f"once-{uuid.uuid4()}"  # not idempotent: reported once, never repeated
    error = await fails(bus, "tool::flaky_once", call(once))
    assert error.remote_code == "unavailable"
    assert error.remote_code in TRANSIENT_ERROR_CODES
    assert "answered 503: warming up, try again" in error.message
    assert [r["call_id"] for r in await server.received("/flaky")].count(once) == 1


async def test_a_failed_connection_is_retried_then_reported_with_its_attempts(bus: Engine) -> None:
    error = await fails(bus, "tool::refused", call("r-1"))
    assert error.remote_code == "connection_failed"
    assert error.message.endswith("(2 attempts)")


async def test_a_slow_endpoint_is_a_typed_timeout_within_its_limit(bus: Engine) -> None:
    started = time.monotonic()
    error = await fails(bus, "tool::slow", call("slow-1", ms=5000))
    elapsed = time.monotonic() - started
    assert error.remote_code == "timeout"
    assert "did not answer within 0.5s" in error.message
    assert 0.45 <= elapsed < 2.0


async def test_a_400_is_a_typed_error_with_the_remote_message(bus: Engine) -> None:
    error = await fails(bus, "tool::invalid", call("i-1", city="Atlantis"))
    assert error.remote_code == "bad_city"
    assert error.message == "unknown city: Atlantis (try another)"
    assert error.remote_code not in TRANSIENT_ERROR_CODES


async def test_the_auth_header_reaches_the_server_and_nothing_else(
    bus: Engine, server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    call_id = f"p-{uuid.uuid4()}"
    assert await bus.trigger("tool::private", call(call_id), timeout=20) == {"authorized": True}
    (seen,) = [r for r in await server.received("/private") if r["call_id"] == call_id]
    assert seen["authorization_ok"] is True

    leaked = await fails(bus, "tool::leaky", call("l-1"))  # the server echoes the header
    assert leaked.remote_code == "refused"
    assert leaked.message == "refused the token ***"  # the whole header value is masked
    unset = await fails(bus, "tool::unset", call("u-1"))
    assert unset.remote_code == "secret_unavailable"
    assert "NO_SUCH_VAR_9 is not set" in unset.message
    await bus.trigger("tool::flaky", call(f"log-{uuid.uuid4()}"), timeout=20)  # a logged retry
    assert "attempt 1 of 3 failed [unavailable]" in caplog.text
    for text in (caplog.text, str(leaked), str(unset)):
        assert TOKEN not in text


@pytest.mark.parametrize("backend", list(BACKENDS))
async def test_a_scripted_agent_calls_the_http_hosted_tool(
    backend: str, server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FN_TOKEN", TOKEN)
    config = HarnessConfig.defaults().model_copy(
        update={"worker_config": harness_config(server, free_closed_port())}
    )
    script: list[dict[str, Any]] = [
        {
            "expect": {"tools_include": ["tool::weather"]},
            "tool_calls": [
                {"function_id": "tool::weather", "arguments": {"city": "Lisbon"}, "id": "w1"}
            ],
        },
        {"expect": {"has_function_result_for": ["w1"]}, "text": "Lisbon: sunny, 21 °C."},
    ]
    async with Harness(
        "scripted:agent",
        config=config,
        home=tmp_path / "home",
        engine=engine_url_for(backend, tmp_path),
        script=script,
        tools=["tool::weather"],
        workers=["http-functions"],
    ) as harness:
        result = await harness.run("What is the weather in Lisbon?")

    assert result.ok, result.error
    assert result.output == "Lisbon: sunny, 21 °C."
    (answer,) = [m for m in result.messages if isinstance(m, FunctionResultMessage)]
    assert (answer.function_call_id, answer.is_error) == ("w1", False)
    assert json.loads(text_of(answer.content)) == {
        "city": "Lisbon",
        "forecast": "sunny in Lisbon",
        "temperature_c": 21,
        "call_id": "w1",
    }
    assert any(r["call_id"] == "w1" for r in await server.received("/weather"))


def test_the_documented_config_loads() -> None:
    docs = Path(__file__).resolve().parents[3] / "docs" / "workers" / "http-functions.md"
    block = docs.read_text(encoding="utf-8").split("```yaml\n", 1)[1].split("```", 1)[0]
    config = HarnessConfig.model_validate(yaml.safe_load(block))
    settings = config.worker_settings(load_worker("http-functions"))
    weather, book = settings.functions
    assert (weather.id, weather.attempts, book.attempts) == ("tool::weather", 3, 1)
    assert weather.variables() == ["WEATHER_TOKEN"]


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"headers": {"Authorization": "Bearer ${not a name}"}}, "as ${NAME}"),
        ({"headers": {"Content-Type": "text/plain"}}, "set by the bridge"),
        ({"url": "http://user:pw@127.0.0.1/x"}, "must not carry credentials"),
        ({"url": "ftp://127.0.0.1/x"}, "http:// or https://"),
        ({"request_schema": {"type": "array"}}, "must describe an object"),
        ({"request_schema": {"type": "object", "required": "city"}}, "not a valid JSON schema"),
        ({"id": "tool:: weather"}, "function id"),
    ],
)
def test_a_config_mistake_is_named(change: dict[str, Any], problem: str) -> None:
    spec = load_worker("http-functions")
    function = {"id": "tool::weather", "url": "http://127.0.0.1:9/weather", **change}
    with pytest.raises(ValueError, match=re.escape(problem)):
        spec.config_model.model_validate({"functions": [function]})
    valid = {"id": "tool::weather", "url": "http://127.0.0.1:9/weather"}
    with pytest.raises(ValueError, match="'tool::weather' is listed twice"):
        spec.config_model.model_validate({"functions": [valid, valid]})
