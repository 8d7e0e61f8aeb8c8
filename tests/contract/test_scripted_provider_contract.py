"""The provider contract suite on the scripted provider."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from tackroom.engine import Engine
from tackroom.testing import Script, ScriptedProvider, ScriptTurn
from tackroom.testing.contracts.provider import (
    FEATURES,
    ProviderContract,
    ProviderSubject,
    Scenario,
)


def turn_for(scenario: Scenario) -> ScriptTurn:
    """The script turn that makes the scripted provider answer ``scenario``."""
    data: dict[str, Any] = {
        "text": scenario.text,
        "thinking": scenario.thinking,
        "tool_calls": [{"name": c.name, "arguments": c.arguments} for c in scenario.tool_calls],
    }
    if scenario.usage is not None:
        data["usage"] = scenario.usage.model_dump()
    if scenario.error_kind is not None:
        data["error"] = {
            "kind": scenario.error_kind,
            "message": scenario.error_message,
            "retry_after": scenario.retry_after,
        }
    return ScriptTurn.model_validate(data)


class ScriptedSubject:
    name = "scripted"
    features = FEATURES

    @asynccontextmanager
    async def serving(
        self, engine: Engine, scenario: Scenario, *, calls: int = 1
    ) -> AsyncIterator[None]:
        provider = ScriptedProvider(Script([turn_for(scenario)] * calls, deltas=7))
        await provider.register(engine)
        try:
            yield
        finally:
            await provider.unregister()
        provider.assert_consumed()


class TestScriptedProvider(ProviderContract):
    @pytest.fixture
    def subject(self) -> ProviderSubject:
        return ScriptedSubject()
