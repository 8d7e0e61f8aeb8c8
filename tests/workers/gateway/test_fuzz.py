"""A property-based fuzz of the HTTP API from its own OpenAPI document (schemathesis): valid and
invalid bodies, queries and ids on every route, with the token, against a live gateway in front
of the real workers. No response may be a 5xx, no body may hold a traceback.

The event stream is left out (it never ends by itself); its bad inputs are tested by hand.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error

from tackroom.workers.gateway.app import openapi_document

from .served import AUTH, WRITE_THEN_ANSWER, gateway_config, serving

schema = schemathesis.openapi.from_dict(openapi_document()).exclude(
    operation_id="streamSessionEvents"
)


def no_traceback(
    ctx: schemathesis.CheckContext, response: schemathesis.Response, case: schemathesis.Case[Any]
) -> None:
    """No traceback in any body; every error in the one error shape, on one line."""
    text = response.content.decode("utf-8", "replace")
    assert "Traceback" not in text, text[:500]
    assert 'File "' not in text, text[:500]
    if response.status_code >= 400:
        error = response.json()["error"]
        assert set(error) <= {"code", "message", "details"}, error
        assert error["code"], error
        assert "\n" not in error["message"], error


@pytest.fixture(scope="module")
def gateway_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A gateway (and the agent workers) in a thread of its own, since the fuzz's HTTP calls
    block: the host runs in that thread's event loop until the module's tests are done."""
    home: Path = tmp_path_factory.mktemp("fuzz")
    config = gateway_config(home, f"embedded:{home / 'engine.db'}", script=WRITE_THEN_ANSWER)
    started = threading.Event()
    urls: list[str] = []
    failures: list[BaseException] = []
    stop: list[asyncio.Event] = []
    loop: list[asyncio.AbstractEventLoop] = []

    async def host() -> None:
        stop.append(asyncio.Event())
        loop.append(asyncio.get_running_loop())
        try:
            async with serving(config) as served:
                urls.append(served.url)
                started.set()
                await stop[0].wait()
        except BaseException as exc:
            failures.append(exc)
            started.set()
            raise

    thread = threading.Thread(target=asyncio.run, args=(host(),), name="fuzzed-gateway")
    thread.start()
    started.wait(60)
    try:
        assert urls, failures
        yield urls[0]
    finally:
        if loop:
            loop[0].call_soon_threadsafe(stop[0].set)
        thread.join(30)


@schema.parametrize()
@settings(
    max_examples=15,
    derandomize=True,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    database=None,
)
def test_no_input_makes_the_gateway_fail(case: schemathesis.Case[Any], gateway_url: str) -> None:
    case.call_and_validate(
        base_url=gateway_url, headers=dict(AUTH), checks=[not_a_server_error, no_traceback]
    )
