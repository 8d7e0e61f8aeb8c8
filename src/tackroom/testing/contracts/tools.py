"""The contract of a tool: a function a model may call, by function id.

A tool worker in any language proves its tool fits by running this suite: subclass
:class:`ToolContract`, name the worker and the tool, and say what a good call and bad calls
look like::

    class TestMyWeather(ToolContract):
        worker_name = "my-weather"          # or worker_command = ["node", "weather.js"]
        tool_id = "tool::weather"

        def valid_arguments(self) -> dict[str, Any]:
            return {"city": "Lisbon"}

        def invalid_arguments(self) -> list[Any]:
            return [{}, {"city": 7}]

        def check_result(self, arguments: dict[str, Any], result: Any) -> None:
            assert result["city"] == "Lisbon"

What every tool keeps, whatever it does:

- it is in the catalog (``engine::functions::list``) under its id with a description and an
  object request schema; traits under ``x-tackroom`` are well formed (see
  :class:`~tackroom.contracts.tools.ToolTraits`);
- a call with valid arguments answers a JSON object that matches its published response
  schema, if it publishes one;
- the orchestrator's call context (``_call``: session, call id, run, principal) travels beside
  the model's arguments and changes nothing about the answer;
- arguments that break its schema, and payloads that are not an object, fail with the typed
  error ``invalid_request`` (never a crash, never an answer);
- concurrent calls are all answered.
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

import jsonschema
import pytest

from tackroom.contracts.tools import CALL_CONTEXT_KEY, TRAITS_KEY, ToolTraits
from tackroom.engine import Engine
from tackroom.engine.protocol import FunctionInfo
from tackroom.testing.contracts.base import WorkerContract
from tackroom.testing.waiting import wait_until

__all__ = ["ToolContract"]

CALL_CONTEXT = {
    "schema_version": 2,
    "session_id": "contract-session",
    "function_call_id": "call-1",
    "run_id": "run-1",
}


class ToolContract(WorkerContract):
    tool_id: ClassVar[str]
    """The function id of the tool under test (``tool::weather``, ``calc::add``)."""

    def valid_arguments(self) -> dict[str, Any]:
        """Arguments a model could send that the tool must answer."""
        raise NotImplementedError

    def invalid_arguments(self) -> list[Any]:
        """Argument objects that break the tool's request schema (a missing required field, a
        wrong type): each must fail with ``invalid_request``."""
        raise NotImplementedError

    def check_result(self, arguments: dict[str, Any], result: Any) -> None:
        """Assert what the answer to ``arguments`` must hold (default: nothing beyond the
        contract's own checks)."""

    # -- helpers -------------------------------------------------------------------------------
    async def catalog_entry(self, bus: Engine) -> FunctionInfo:
        found: list[FunctionInfo] = []

        async def listed() -> bool:
            found[:] = [i for i in await bus.list_functions() if i.function_id == self.tool_id]
            return bool(found)

        await wait_until(listed, timeout=10.0, message=f"{self.tool_id} in the catalog")
        return found[0]

    # -- the catalog ---------------------------------------------------------------------------
    async def test_the_tool_is_in_the_catalog_with_an_object_schema(self, bus: Engine) -> None:
        info = await self.catalog_entry(bus)
        assert info.description.strip(), "a model chooses a tool by its description"
        schema = info.request_schema
        assert isinstance(schema, dict)
        assert schema.get("type") == "object", schema
        assert isinstance(schema.get("properties", {}), dict)
        jsonschema.Draft202012Validator.check_schema(schema)
        jsonschema.validate(self.valid_arguments(), schema)

    async def test_traits_are_well_formed(self, bus: Engine) -> None:
        schema = (await self.catalog_entry(bus)).request_schema or {}
        traits = schema.get(TRAITS_KEY)
        if traits is None:
            return
        assert isinstance(traits, dict), traits
        for key in ("idempotent", "parallel", "read_only", "requires_approval"):
            assert isinstance(traits.get(key, False), bool), (key, traits)
        ToolTraits.model_validate(traits)

    # -- calls ---------------------------------------------------------------------------------
    async def test_a_valid_call_is_answered_as_its_schema_says(self, bus: Engine) -> None:
        info = await self.catalog_entry(bus)
        arguments = self.valid_arguments()
        result = await self.call(bus, self.tool_id, arguments)
        assert isinstance(result, dict), f"a tool answers a JSON object, not {result!r}"
        if info.response_schema:
            jsonschema.validate(result, info.response_schema)
        self.check_result(arguments, result)

    async def test_the_call_context_is_not_an_argument(self, bus: Engine) -> None:
        await self.catalog_entry(bus)
        arguments = self.valid_arguments()
        with_context = {**arguments, CALL_CONTEXT_KEY: CALL_CONTEXT}
        result = await self.call(bus, self.tool_id, with_context)
        assert isinstance(result, dict)
        self.check_result(arguments, result)

    async def test_arguments_that_break_the_schema_are_invalid_requests(self, bus: Engine) -> None:
        await self.catalog_entry(bus)
        cases = self.invalid_arguments()
        assert cases, "name at least one invalid argument object"
        for arguments in cases:
            assert await self.code_of(bus, self.tool_id, arguments) == "invalid_request", arguments

    @pytest.mark.parametrize("payload", ["text", ["a"], 7])
    async def test_a_payload_that_is_not_an_object_is_an_invalid_request(
        self, bus: Engine, payload: Any
    ) -> None:
        await self.catalog_entry(bus)
        assert await self.code_of(bus, self.tool_id, payload) == "invalid_request"

    async def test_concurrent_calls_are_all_answered(self, bus: Engine) -> None:
        await self.catalog_entry(bus)
        arguments = self.valid_arguments()
        results = await asyncio.gather(
            *(self.call(bus, self.tool_id, arguments) for _ in range(20))
        )
        for result in results:
            assert isinstance(result, dict)
            self.check_result(arguments, result)
