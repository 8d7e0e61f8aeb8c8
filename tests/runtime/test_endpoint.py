"""The local endpoint in process: frames, typed errors, concurrency, permissions, lifecycle."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import stat
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from tackroom.engine import (
    Engine,
    FunctionError,
    FunctionNotFound,
    InvalidPayload,
    InvocationError,
    InvocationTimeout,
    open_engine,
)
from tackroom.runtime import (
    EndpointError,
    EndpointInUse,
    EndpointUnavailable,
    FrameTooLarge,
    LocalClient,
    LocalEndpoint,
)
from tackroom.testing import SpanRecorder, memory_engine

FRAME_LIMIT = 4096


class HelloRequestLike(BaseModel):
    name: str


async def serve_test_functions(engine: Engine) -> None:
    async def echo(payload: Any) -> Any:
        return payload

    async def fail(payload: Any) -> Any:
        raise FunctionError("no_luck", "it did not work")

    async def hang(payload: Any) -> Any:
        await asyncio.Event().wait()

    async def big(payload: Any) -> Any:
        return "x" * FRAME_LIMIT

    for function_id, handler in [
        ("t::echo", echo),
        ("t::fail", fail),
        ("t::hang", hang),
        ("t::big", big),
    ]:
        await engine.register_function(function_id, handler, worker="t")


@pytest.fixture
async def engine() -> AsyncIterator[Engine]:
    async with memory_engine() as started:
        await serve_test_functions(started)
        yield started


@pytest.fixture
async def endpoint(engine: Engine, short_tmp: Path) -> AsyncIterator[LocalEndpoint]:
    served = LocalEndpoint(engine, path=short_tmp / "run" / "t.sock", max_frame_bytes=FRAME_LIMIT)
    await served.start()
    try:
        yield served
    finally:
        await served.close()


@pytest.fixture
async def client(endpoint: LocalEndpoint) -> AsyncIterator[LocalClient]:
    async with LocalClient(endpoint.path, max_frame_bytes=FRAME_LIMIT) as connected:
        yield connected


async def test_a_trigger_round_trips(client: LocalClient) -> None:
    assert await client.trigger("t::echo", {"a": [1, "two", None]}) == {"a": [1, "two", None]}
    assert await client.trigger("t::echo") is None


def test_the_socket_is_owner_only(endpoint: LocalEndpoint) -> None:
    assert stat.S_ISSOCK(endpoint.path.stat().st_mode)
    assert stat.S_IMODE(endpoint.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(endpoint.path.parent.stat().st_mode) == 0o700


async def test_typed_errors_come_back_typed(client: LocalClient) -> None:
    with pytest.raises(FunctionNotFound) as not_found:
        await client.trigger("t::ecco", 1)
    assert not_found.value.function_id == "t::ecco"
    assert not_found.value.suggestions == ["t::echo"]
    with pytest.raises(InvocationError) as failed:
        await client.trigger("t::fail", 1)
    assert (failed.value.remote_code, failed.value.message) == ("no_luck", "it did not work")
    with pytest.raises(InvocationTimeout) as timed_out:
        await client.trigger("t::hang", 1, timeout=0.05)
    assert timed_out.value.timeout == 0.05
    with pytest.raises(FrameTooLarge, match="response of"):
        await client.trigger("t::big")
    assert await client.trigger("t::echo", "still fine") == "still fine"


async def test_many_requests_are_in_flight_on_one_connection(
    engine: Engine, client: LocalClient
) -> None:
    count = 20
    arrived = 0
    everyone_here = asyncio.Event()

    async def gather_all(payload: Any) -> Any:
        nonlocal arrived
        arrived += 1
        if arrived == count:
            everyone_here.set()
        await everyone_here.wait()  # only returns if all 20 calls run at the same time
        return payload

    await engine.register_function("t::gather", gather_all)
    results = await asyncio.gather(
        *(client.trigger("t::gather", n, timeout=5) for n in range(count))
    )
    assert results == list(range(count))


async def raw_exchange(path: Path, *lines: bytes) -> list[dict[str, Any]]:
    reader, writer = await asyncio.open_unix_connection(path)
    try:
        answers = []
        for line in lines:
            writer.write(line)
            await writer.drain()
            answers.append(json.loads(await asyncio.wait_for(reader.readline(), 5)))
        return answers
    finally:
        writer.close()
        await writer.wait_closed()


def request(**fields: Any) -> bytes:
    return json.dumps({"schema_version": 1, **fields}).encode() + b"\n"


async def test_bad_frames_get_an_error_frame_and_the_connection_stays(
    endpoint: LocalEndpoint,
) -> None:
    answers = await raw_exchange(
        endpoint.path,
        b"this is not json\n",
        b"x" * (FRAME_LIMIT * 3) + b"\n",
        b"[1, 2]\n",
        b'{"schema_version": 1, "id": "nan", "function_id": "t::echo", "payload": NaN}\n',
        json.dumps({"schema_version": 9, "id": "v", "function_id": "t::echo"}).encode() + b"\n",
        request(id="m", payload=1),
        request(id="n", function_id="t::echo", timeout=-1),
        request(id="ok", function_id="t::echo", payload="fine"),
    )
    codes = [(a["id"], a["ok"], a.get("error", {}).get("code")) for a in answers]
    assert codes == [
        (None, False, "invalid_frame"),
        (None, False, "frame_too_large"),
        (None, False, "invalid_frame"),
        (None, False, "invalid_frame"),
        ("v", False, "invalid_frame"),
        ("m", False, "invalid_frame"),
        ("n", False, "invalid_frame"),
        ("ok", True, None),
    ]
    assert all(a["schema_version"] == 1 for a in answers)
    assert "NaN is not a JSON value" in answers[3]["error"]["message"]
    assert "function_id: Field required" in answers[5]["error"]["message"]
    assert answers[7]["result"] == "fine"


async def test_deep_or_unencodable_frames_get_a_typed_answer(
    engine: Engine, short_tmp: Path
) -> None:
    endpoint = LocalEndpoint(engine, path=short_tmp / "deep.sock")
    await endpoint.start()
    try:
        deep = b"[" * 100_000 + b"]" * 100_000
        frame = b'{"schema_version": 1, "id": "d", "function_id": "t::echo", "payload": '
        answers = await raw_exchange(
            endpoint.path,
            frame + deep + b"}\n",
            request(id="p", function_id="t::echo", payload=_nested(300)),
            b'{"schema_version": 1, "id": "s", "function_id": "t::echo", "payload": "\\ud800"}\n',
            request(id="ok", function_id="t::echo", payload="fine"),
        )
    finally:
        await endpoint.close()
    codes = [(a["id"], a.get("error", {}).get("code")) for a in answers]
    assert codes == [
        (None, "invalid_frame"),
        ("p", "invalid_payload"),
        ("s", "invalid_payload"),
        ("ok", None),
    ]
    assert "nests deeper than" in answers[0]["error"]["message"]
    assert "nests deeper than" in answers[1]["error"]["message"]
    assert "lone surrogate" in answers[2]["error"]["message"]


def _nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


async def test_error_frames_carry_the_wire_form(endpoint: LocalEndpoint) -> None:
    [answer] = await raw_exchange(endpoint.path, request(id=7, function_id="t::ecco"))
    assert answer == {
        "schema_version": 1,
        "id": 7,
        "ok": False,
        "error": FunctionNotFound("t::ecco", ["t::echo"]).to_wire(),
    }


async def test_a_stale_socket_is_replaced(engine: Engine, short_tmp: Path) -> None:
    path = short_tmp / "stale.sock"
    crashed = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    crashed.bind(str(path))
    crashed.close()  # the file stays, nobody listens: what a SIGKILLed serve leaves
    endpoint = LocalEndpoint(engine, path=path)
    await endpoint.start()
    try:
        async with LocalClient(path) as client:
            assert await client.trigger("t::echo", 1) == 1
    finally:
        await endpoint.close()
    assert not path.exists()


async def test_a_live_socket_is_refused(endpoint: LocalEndpoint, engine: Engine) -> None:
    with pytest.raises(EndpointInUse, match="another tackroom process"):
        await LocalEndpoint(engine, path=endpoint.path).start()
    async with LocalClient(endpoint.path) as client:
        assert await client.trigger("t::echo", "first still serves") == "first still serves"


@pytest.mark.parametrize("name", ["a" * 120 + ".sock", "a" * 300 + ".sock", "a" * 300 + "/x.sock"])
async def test_a_socket_path_too_long_is_a_typed_error(
    engine: Engine, short_tmp: Path, name: str
) -> None:
    path = short_tmp / name
    with pytest.raises(EndpointError, match="longer than the 107 bytes"):
        await LocalEndpoint(engine, path=path).start()
    with pytest.raises(EndpointUnavailable, match="longer than the 107 bytes"):
        await LocalClient(path).connect()
    assert os.listdir(short_tmp) == []


async def test_a_file_that_is_not_a_socket_is_left_alone(engine: Engine, short_tmp: Path) -> None:
    path = short_tmp / "notes.txt"
    path.write_text("mine")
    with pytest.raises(EndpointError, match="not a socket"):
        await LocalEndpoint(engine, path=path).start()
    assert path.read_text() == "mine"


async def test_close_removes_the_socket_and_ends_pending_calls(
    engine: Engine, endpoint: LocalEndpoint, client: LocalClient
) -> None:
    parked = asyncio.Event()

    async def park(payload: Any) -> Any:
        parked.set()
        await asyncio.Event().wait()

    await engine.register_function("t::park", park)
    pending = asyncio.create_task(client.trigger("t::park", 1, timeout=30))
    await asyncio.wait_for(parked.wait(), 5)
    await endpoint.close()
    assert not endpoint.path.exists()
    with pytest.raises(EndpointUnavailable):
        await asyncio.wait_for(pending, 5)
    with pytest.raises(EndpointUnavailable):
        await client.trigger("t::echo", 1)


async def test_no_endpoint_is_a_typed_error(short_tmp: Path) -> None:
    with pytest.raises(EndpointUnavailable, match="no tackroom serve is listening"):
        await LocalClient(short_tmp / "nothing.sock").connect()


async def test_client_checks_its_request_before_sending(client: LocalClient) -> None:
    with pytest.raises(FrameTooLarge, match="request of"):
        await client.trigger("t::echo", "y" * FRAME_LIMIT)
    with pytest.raises(InvalidPayload, match="not a JSON number"):
        await client.trigger("t::echo", float("nan"))
    with pytest.raises(InvalidPayload, match="nests deeper than"):
        await client.trigger("t::echo", _nested(100_000))
    with pytest.raises(InvalidPayload, match="lone surrogate"):
        await client.trigger("t::echo", "\ud800")
    assert await client.trigger("t::echo", HelloRequestLike(name="Ada")) == {"name": "Ada"}


async def test_the_callers_trace_continues_in_the_engine(short_tmp: Path) -> None:
    recorder = SpanRecorder()
    engine = open_engine("embedded::memory:", tracer_provider=recorder.provider)
    await engine.start()
    await serve_test_functions(engine)
    endpoint = LocalEndpoint(engine, path=short_tmp / "t.sock")
    await endpoint.start()
    try:
        async with LocalClient(endpoint.path) as client:
            with recorder.tracer().start_as_current_span("caller") as caller:
                await client.trigger("t::echo", 1)
        served = await recorder.wait_for_span("trigger t::echo")
        assert served.context is not None
        assert served.context.trace_id == caller.get_span_context().trace_id
        assert served.parent is not None
        assert served.parent.span_id == caller.get_span_context().span_id
    finally:
        await endpoint.close()
        await engine.close()
        recorder.provider.shutdown()


async def test_answers_still_arrive_after_the_client_closes_its_write_side(
    engine: Engine, endpoint: LocalEndpoint
) -> None:
    running, release = asyncio.Event(), asyncio.Event()

    async def slow(payload: Any) -> Any:
        running.set()
        await release.wait()
        return payload

    await engine.register_function("t::slow", slow)
    reader, writer = await asyncio.open_unix_connection(endpoint.path)
    try:
        writer.write(request(id="s", function_id="t::slow", payload="late"))
        await asyncio.wait_for(running.wait(), 5)
        writer.write_eof()
        release.set()
        answer = json.loads(await asyncio.wait_for(reader.readline(), 5))
        assert (answer["id"], answer["result"]) == ("s", "late")
        assert await asyncio.wait_for(reader.read(), 5) == b""  # then the endpoint closes
    finally:
        writer.close()
        await writer.wait_closed()
