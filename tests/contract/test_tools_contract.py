"""The tool contract suite against a shipped tool: ``calc::add`` of the ``utilities`` worker."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from tackroom.testing.contracts import ToolContract


class TestCalcAdd(ToolContract):
    worker_name = "utilities"
    tool_id = "calc::add"

    def valid_arguments(self) -> dict[str, Any]:
        return {"a": 2, "b": 0.5}

    def invalid_arguments(self) -> list[Any]:
        return [{}, {"a": 1}, {"a": "two", "b": 1}, {"a": 1, "b": 2, "c": 3}]

    def check_result(self, arguments: dict[str, Any], result: Any) -> None:
        assert Decimal(str(result["result"])) == Decimal("2.5")
