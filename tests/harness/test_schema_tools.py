"""``ToolSpec(name=, description=, input_schema=, handler=)``: seed 003's tool, checked early."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tackroom import Harness, ToolSpec, UsageError
from tackroom.contracts.tools import traits_of
from tackroom.engine.errors import FunctionError
from tackroom.testing import FunctionModel

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
    "required": ["city"],
}


def spec(handler: Any = None, **changes: Any) -> ToolSpec:
    fields: dict[str, Any] = {
        "name": "get_weather",
        "description": "The weather.",
        "input_schema": SCHEMA,
        "handler": handler or (lambda input: {"echo": input}),
    }
    return ToolSpec(**{**fields, **changes})


async def test_the_handler_gets_the_input_dict_sync_or_async() -> None:
    async def forecast(input: dict[str, Any]) -> dict[str, Any]:
        return {"days": input.get("days", 1)}

    assert await spec().invoke(
        {"city": "Oslo", "_call": {"session_id": "s", "function_call_id": "c"}}
    ) == {"echo": {"city": "Oslo"}}
    assert await spec(forecast).invoke({"city": "Oslo", "days": 3}) == {"days": 3}


async def test_input_that_does_not_validate_is_refused_with_every_reason() -> None:
    called: list[Any] = []
    tool = spec(called.append)
    with pytest.raises(FunctionError) as caught:
        await tool.invoke({"days": 0})
    assert caught.value.code == "invalid_request"
    assert str(caught.value.message) == (
        "arguments: 'city' is a required property; arguments.days: 0 is less than the minimum of 1"
    )
    many = {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(7)}}
    with pytest.raises(FunctionError, match=r"; and 2 more$"):
        await spec(input_schema=many).invoke({f"p{i}": "x" for i in range(7)})
    assert called == []


async def test_a_failing_handler_is_the_error_the_model_reads() -> None:
    def broken(input: dict[str, Any]) -> None:
        raise RuntimeError("disk on fire")

    with pytest.raises(FunctionError) as caught:
        await spec(broken).invoke({"city": "Oslo"})
    assert (caught.value.code, caught.value.message) == ("tool_error", "RuntimeError: disk on fire")


def test_the_schema_goes_to_the_catalog_with_the_traits() -> None:
    schema = spec(idempotent=True, timeout=10).request_schema()
    assert schema["properties"] == SCHEMA["properties"]
    assert schema["x-tackroom"]["idempotent"] is True
    assert schema["x-tackroom"]["timeout"] == 10
    assert spec().function_id == "tool::get_weather"


@pytest.mark.parametrize(
    ("changes", "said"),
    [
        ({"input_schema": {"type": "array"}}, "input_schema must describe an object"),
        (
            {"input_schema": {"type": "object", "properties": {"a": {"type": 12}}}},
            "input_schema is invalid at properties/a/type: 12 is not valid",
        ),
        ({"handler": "get_weather"}, "handler= (a callable) and input_schema= go together"),
        ({"function": print}, "give handler= and input_schema="),
        ({"name": "get weather"}, "tool name 'get weather' must be 1-64 letters"),
        ({"timeout": 0}, "timeout must be a positive number of seconds"),
    ],
)
def test_a_bad_tool_is_refused_when_it_is_defined(changes: dict[str, Any], said: str) -> None:
    with pytest.raises(UsageError) as caught:
        spec(**changes)
    assert said in str(caught.value)
    assert "\n" not in str(caught.value)


def test_neither_form_is_refused() -> None:
    with pytest.raises(UsageError, match="give handler= and input_schema="):
        ToolSpec(name="x")


def test_a_tool_says_how_it_fails_when_the_policy_cannot_decide() -> None:
    def lookup(key: str) -> str:
        """Look a key up."""
        return key

    tool = ToolSpec.from_function(lookup, on_policy_error="allow")
    assert tool.request_schema()["x-tackroom"]["on_policy_error"] == "allow"
    assert "on_policy_error" not in ToolSpec.from_function(lookup).request_schema()["x-tackroom"]


def test_a_tool_declares_its_data_flow(tmp_path: Path) -> None:
    def send_mail(to: str, body: str) -> str:
        """Send a mail."""
        return "sent"

    harness = Harness(FunctionModel(lambda m, i: "x"), home=tmp_path)

    @harness.tool(untrusted_output=True, side_effect="none", sinks=["folder"])
    def read_inbox(folder: str) -> str:
        """Read the inbox."""
        return folder

    inbox = harness.register_tool(read_inbox)  # registered already: the same spec
    read = traits_of(inbox.request_schema())
    assert (read.untrusted_output, read.effect, read.sinks) == (True, "none", ["folder"])
    mail = traits_of(ToolSpec.from_function(send_mail, sinks=["to"]).request_schema())
    assert (mail.sinks, mail.effect, mail.untrusted_output) == (["to"], "external", False)
    seeded = traits_of(spec(side_effect="internal", sinks=["city"]).request_schema())
    assert (seeded.side_effect, seeded.sinks) == ("internal", ["city"])
    with pytest.raises(UsageError, match=r"sinks \['recipient'\] are not among its arguments"):
        ToolSpec.from_function(send_mail, sinks=["recipient"])
    with pytest.raises(UsageError, match="side_effect must be one of none, internal, external"):
        spec(side_effect="sometimes")
