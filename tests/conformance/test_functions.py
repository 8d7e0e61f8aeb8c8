"""Functions: trigger, payload copying, errors, replicas and the registry listings."""

from __future__ import annotations

import asyncio
import enum
import itertools
import os
from datetime import UTC, datetime
from typing import Any

import pydantic
import pytest

from tackroom.engine import (
    Engine,
    FunctionError,
    FunctionNotFound,
    InvalidPayload,
    InvalidUpdate,
    InvocationError,
    InvocationTimeout,
    LazySchema,
    current_invocation,
)
from tackroom.testing import Call, RecordingHandler, wait_until


async def _echo(payload: Any) -> Any:
    return payload


async def test_trigger_returns_the_handler_result(engine: Engine, peer: Engine) -> None:
    async def add(payload: Any) -> Any:
        return {"sum": payload["a"] + payload["b"]}

    await engine.register_function("math::add", add)

    assert await peer.trigger("math::add", {"a": 2, "b": 3}, timeout=5) == {"sum": 5}


async def test_trigger_without_payload_passes_none(engine: Engine, peer: Engine) -> None:
    handler = RecordingHandler()
    await engine.register_function("demo::ping", handler)

    assert await peer.trigger("demo::ping", timeout=5) is None
    assert handler.payloads == [None]


async def test_payload_is_copied_so_handler_mutation_does_not_reach_the_caller(
    engine: Engine,
    peer: Engine,
) -> None:
    async def mutate(payload: Any) -> Any:
        payload["items"].append("from handler")
        payload["added"] = True
        return "ok"

    await engine.register_function("demo::mutate", mutate)
    payload = {"items": ["from caller"], "nested": {"n": 1}}

    assert await peer.trigger("demo::mutate", payload, timeout=5) == "ok"
    assert payload == {"items": ["from caller"], "nested": {"n": 1}}


async def test_result_is_copied_so_caller_mutation_does_not_reach_the_handler(
    engine: Engine,
    peer: Engine,
) -> None:
    kept: dict[str, Any] = {"items": [1]}

    async def give(payload: Any) -> Any:
        return kept

    await engine.register_function("demo::give", give)
    result = await peer.trigger("demo::give", timeout=5)
    result["items"].append(2)

    assert kept == {"items": [1]}


class Colour(enum.Enum):
    RED = "red"


class Greeting(pydantic.BaseModel):
    name: str
    at: datetime
    colour: Colour
    tags: list[str] = []


async def test_pydantic_model_payload_is_serialized_as_json(engine: Engine, peer: Engine) -> None:
    handler = RecordingHandler(lambda call: _echo(call.payload))
    await engine.register_function("demo::greet", handler)
    model = Greeting(name="Ada", at=datetime(2024, 5, 1, 12, 0, tzinfo=UTC), colour=Colour.RED)

    result = await peer.trigger("demo::greet", model, timeout=5)

    assert handler.payloads == [model.model_dump(mode="json")]
    assert isinstance(handler.payloads[0], dict)
    assert result == {"name": "Ada", "at": "2024-05-01T12:00:00Z", "colour": "red", "tags": []}


NOT_JSON: list[Any] = [
    object(),
    {1: "int key"},
    {"set": {1, 2}},
    b"bytes",
    {"nested": [{"when": datetime(2024, 1, 1, tzinfo=UTC)}]},
]


@pytest.mark.parametrize("payload", NOT_JSON, ids=["object", "int-key", "set", "bytes", "datetime"])
async def test_non_json_payload_raises_invalid_payload_before_invoking(
    engine: Engine, peer: Engine, payload: Any
) -> None:
    handler = RecordingHandler()
    await engine.register_function("demo::strict", handler)

    with pytest.raises(InvalidPayload):
        await peer.trigger("demo::strict", payload, timeout=5)
    assert handler.calls == []


async def test_unknown_function_raises_function_not_found_with_suggestions(
    engine: Engine,
    peer: Engine,
) -> None:
    await engine.register_function("state::get", _echo)
    await engine.register_function("demo::greet", _echo)

    with pytest.raises(FunctionNotFound) as caught:
        await peer.trigger("state::gett", {}, timeout=5)

    assert caught.value.function_id == "state::gett"
    assert "state::get" in caught.value.suggestions
    assert "demo::greet" not in caught.value.suggestions


async def test_unknown_function_without_close_match_raises_function_not_found(
    engine: Engine,
    peer: Engine,
) -> None:
    with pytest.raises(FunctionNotFound) as caught:
        await peer.trigger("nothing::here", timeout=5)
    assert caught.value.function_id == "nothing::here"


async def test_slow_handler_raises_invocation_timeout_and_is_cancelled(
    engine: Engine, peer: Engine
) -> None:
    async def hang(call: Call) -> Any:
        await asyncio.Event().wait()

    handler = RecordingHandler(hang)
    await engine.register_function("demo::hang", handler)

    with pytest.raises(InvocationTimeout) as caught:
        await peer.trigger("demo::hang", {}, timeout=0.2)

    assert caught.value.function_id == "demo::hang"
    await wait_until(lambda: handler.calls and handler.calls[0].cancelled)


async def test_function_error_becomes_invocation_error_with_its_code(
    engine: Engine, peer: Engine
) -> None:
    async def refuse(payload: Any) -> Any:
        raise FunctionError("bad_input", "name is required")

    await engine.register_function("demo::refuse", refuse)

    with pytest.raises(InvocationError) as caught:
        await peer.trigger("demo::refuse", {}, timeout=5)

    assert caught.value.function_id == "demo::refuse"
    assert caught.value.remote_code == "bad_input"
    assert caught.value.message == "name is required"


OTHER_EXCEPTIONS: dict[str, tuple[Exception, str, str]] = {
    "value-error": (ValueError("boom"), "internal", "ValueError: boom"),
    "runtime-error": (RuntimeError("it broke"), "internal", "RuntimeError: it broke"),
    "engine-error": (InvalidUpdate("bad op"), "invalid_update", "InvalidUpdate: bad op"),
}


@pytest.mark.parametrize(
    ("exc", "code", "message"), list(OTHER_EXCEPTIONS.values()), ids=list(OTHER_EXCEPTIONS)
)
async def test_other_exception_becomes_a_typed_invocation_error(
    engine: Engine, peer: Engine, exc: Exception, code: str, message: str
) -> None:
    """Plain exceptions are "internal"; an engine error keeps its own code."""

    async def crash(payload: Any) -> Any:
        raise exc

    await engine.register_function("demo::crash", crash)

    with pytest.raises(InvocationError) as caught:
        await peer.trigger("demo::crash", {}, timeout=5)

    assert caught.value.remote_code == code
    assert caught.value.message == message


async def test_non_json_result_becomes_invalid_result_invocation_error(
    engine: Engine, peer: Engine
) -> None:
    async def bad_result(payload: Any) -> Any:
        return {"when": object()}

    await engine.register_function("demo::bad_result", bad_result)

    with pytest.raises(InvocationError) as caught:
        await peer.trigger("demo::bad_result", {}, timeout=5)

    assert caught.value.remote_code == "invalid_result"


async def test_replicas_are_called_round_robin(engine: Engine, peer: Engine) -> None:
    async def replica_a(payload: Any) -> Any:
        return "a"

    async def replica_b(payload: Any) -> Any:
        return "b"

    await engine.register_function("demo::rr", replica_a)
    await engine.register_function("demo::rr", replica_b)

    results = [await peer.trigger("demo::rr", i, timeout=5) for i in range(6)]

    assert sorted(results) == ["a", "a", "a", "b", "b", "b"]
    assert all(first != second for first, second in itertools.pairwise(results))


async def test_unregister_removes_only_that_replica(engine: Engine, peer: Engine) -> None:
    async def replica_a(payload: Any) -> Any:
        return "a"

    async def replica_b(payload: Any) -> Any:
        return "b"

    reg_a = await engine.register_function("demo::rr", replica_a)
    reg_b = await engine.register_function("demo::rr", replica_b)
    assert reg_a.id != reg_b.id

    await reg_a.unregister()

    assert [await peer.trigger("demo::rr", i, timeout=5) for i in range(4)] == ["b"] * 4
    assert len([f for f in await engine.list_functions() if f.function_id == "demo::rr"]) == 1

    await reg_b.unregister()
    with pytest.raises(FunctionNotFound):
        await peer.trigger("demo::rr", timeout=5)


async def test_list_functions_has_one_entry_per_registration(engine: Engine) -> None:
    request_schema = {"type": "object", "properties": {"name": {"type": "string"}}}
    response_schema = {"type": "string"}
    await engine.register_function(
        "demo::greet",
        _echo,
        description="Say hello",
        request_schema=request_schema,
        response_schema=response_schema,
        worker="greeter",
    )
    await engine.register_function("demo::greet", _echo, description="Say hello", worker="spare")

    infos = sorted(
        (f for f in await engine.list_functions() if f.function_id == "demo::greet"),
        key=lambda f: f.worker,
    )

    assert [f.worker for f in infos] == ["greeter", "spare"]
    assert infos[0].description == "Say hello"
    assert infos[0].request_schema == request_schema
    assert infos[0].response_schema == response_schema
    assert infos[1].request_schema is None
    assert infos[1].response_schema is None


async def test_a_lazy_schema_is_listed_as_built_and_built_once(
    engine: Engine, backend: str
) -> None:
    built: list[str] = []

    def schema(kind: str) -> dict[str, Any]:
        built.append(kind)
        return {"type": "object", "title": kind}

    await engine.register_function(
        "demo::lazy",
        _echo,
        request_schema=LazySchema(lambda: schema("request")),
        response_schema=LazySchema(lambda: schema("response")),
        worker="lazy",
    )
    if backend == "embedded":
        assert built == []  # built when listed; NATS publishes its catalog at registration

    for _ in range(2):
        [info] = [f for f in await engine.list_functions() if f.function_id == "demo::lazy"]
        assert info.request_schema == {"type": "object", "title": "request"}
        assert info.response_schema == {"type": "object", "title": "response"}
    assert sorted(built) == ["request", "response"]  # once each, however often listed


async def test_list_workers_groups_function_ids_by_worker(engine: Engine) -> None:
    await engine.register_function("alpha::one", _echo, worker="alpha")
    await engine.register_function("alpha::two", _echo, worker="alpha")
    await engine.register_function("beta::one", _echo, worker="beta")

    workers = {w.name: w for w in await engine.list_workers()}

    assert set(workers["alpha"].functions) == {"alpha::one", "alpha::two"}
    assert set(workers["beta"].functions) == {"beta::one"}
    assert workers["alpha"].pid == os.getpid()
    assert isinstance(workers["alpha"].host, str)
    assert workers["alpha"].host


async def test_current_invocation_inside_a_triggered_handler(engine: Engine, peer: Engine) -> None:
    handler = RecordingHandler()
    await engine.register_function("demo::who", handler)

    await peer.trigger("demo::who", {"x": 1}, timeout=5)

    invocation = handler.calls[0].invocation
    assert invocation is not None
    assert invocation.function_id == "demo::who"
    assert invocation.kind == "trigger"
    assert invocation.attempt == 1
    assert current_invocation() is None


async def test_nested_trigger_sees_its_own_invocation_and_restores_the_outer(
    engine: Engine,
    peer: Engine,
) -> None:
    async def inner(payload: Any) -> Any:
        invocation = current_invocation()
        assert invocation is not None
        return invocation.function_id

    async def outer(payload: Any) -> Any:
        inner_id = await engine.trigger("demo::inner", {}, timeout=5)
        invocation = current_invocation()
        assert invocation is not None
        return [inner_id, invocation.function_id]

    await engine.register_function("demo::inner", inner)
    await engine.register_function("demo::outer", outer)

    assert await peer.trigger("demo::outer", {}, timeout=5) == ["demo::inner", "demo::outer"]
