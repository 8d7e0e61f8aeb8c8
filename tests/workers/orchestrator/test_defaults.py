"""The defaults are the seed's where docs/defaults.md says so, and every setting of the turn has
its line there; the context fills at most 85 % of a model's window."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tackroom.contracts.context import ContextSettings
from tackroom.contracts.guards import LoopGuard
from tackroom.kit.context import window_and_reserve
from tackroom.kit.providers.config import RetrySettings
from tackroom.workers.orchestrator.dispatch import Dispatcher
from tackroom.workers.orchestrator.worker import OrchestratorConfig
from tackroom.workers.policy.worker import PolicyConfig
from tackroom.workers.policy_cedar.worker import CedarPolicyConfig

DEFAULTS = (Path(__file__).parents[3] / "docs" / "defaults.md").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("prefix", "fields"),
    [
        ("orchestrator.", OrchestratorConfig.model_fields),
        ("context.", ContextSettings.model_fields),
        (
            "orchestrator.loop_guard.",
            {k: v for k, v in LoopGuard.model_fields.items() if k != "schema_version"},
        ),
    ],
)
def test_every_setting_has_its_line_with_a_reason(prefix: str, fields: dict[str, object]) -> None:
    missing = [name for name in fields if f"`{prefix}{name}" not in DEFAULTS]
    assert not missing, f"docs/defaults.md says nothing of {missing}"


def test_the_seeds_numbers_are_the_defaults() -> None:
    config = OrchestratorConfig()
    assert (config.call_timeout, config.tool_retries) == (15.0, 1)
    assert config.policy_on_error == "deny"
    assert (config.loop_guard.same_tool_limit, config.loop_guard.identical_call_limit) == (3, 3)
    assert (config.context.max_fill, config.context.pin_first_turn) == (0.85, False)
    assert RetrySettings().max_retries == 2
    assert PolicyConfig().on_error == CedarPolicyConfig().on_error == "deny"
    for line in ("| `15` s |", "| `1` |", "| `2` |", "| `3` |", "| `0.85` |", "| `deny` |"):
        assert line in DEFAULTS


def test_one_tool_retry_by_default() -> None:
    parts: dict[str, Any] = {"gate": None, "subagents": None, "flows": None}
    assert Dispatcher(None, call_timeout=15.0, **parts)._pauses == (0.2,)  # type: ignore[arg-type]
    assert Dispatcher(None, call_timeout=1, tool_retries=0, **parts)._pauses == ()  # type: ignore[arg-type]


def test_the_prompt_fills_at_most_85_percent_of_the_models_window() -> None:
    settings = ContextSettings()
    # a large window with a small output limit: the reserve alone would let the prompt fill 97 %
    window, reserve = window_and_reserve(
        context_window=128_000, max_output_tokens=4_096, settings=settings
    ) or (0, 0)
    assert (window, window - reserve) == (128_000, 108_800)
    # the seed's example: a 32K model's prompt kept under 28K
    window, reserve = window_and_reserve(
        context_window=32_000, max_output_tokens=2_000, settings=settings
    ) or (0, 0)
    assert window - reserve == 27_200
    # a reserve that already keeps more free is kept
    assert window_and_reserve(
        context_window=32_000, max_output_tokens=16_000, settings=settings
    ) == (32_000, 8_000)
    # an explicit limit below the fill is the operator's own: not cut again
    limited = ContextSettings(context_window_limit=12_000)
    assert window_and_reserve(
        context_window=128_000, max_output_tokens=4_096, settings=limited
    ) == (12_000, 3_000)
    # and the fill can be lifted
    full = ContextSettings(max_fill=1.0)
    assert window_and_reserve(context_window=128_000, max_output_tokens=4_096, settings=full) == (
        128_000,
        4_096,
    )


def test_context_settings_at_their_defaults_go_on_the_wire_as_before() -> None:
    assert "max_fill" not in ContextSettings().model_dump(mode="json")
    assert "pin_first_turn" not in ContextSettings().model_dump(mode="json")
    changed = ContextSettings(max_fill=0.7, pin_first_turn=True).model_dump(mode="json")
    assert (changed["max_fill"], changed["pin_first_turn"]) == (0.7, True)
