"""A policy's ``matched_constraint`` stays a JSON object on its way to the model and the UIs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tackroom.contracts.events import GateDecided
from tackroom.contracts.messages import FunctionResultMessage
from tackroom.contracts.policy import CHECK_PERMISSIONS
from tackroom.harness import Harness
from tackroom.runtime.config import HarnessConfig

RULES = """\
schema_version: 1
rules:
  - id: no-big-sums
    function: calc::add
    decision: deny
    reason: sums past 999 are not allowed
    args:
      a: {range: {min: 1000}}
"""

CONSTRAINT = {"arg": "a", "op": "range", "value": {"min": 1000, "max": None}}


def _constraint_of(value: Any) -> Any:
    """The reply's constraint, compared without caring how ``range`` spells an open end."""
    assert isinstance(value, dict), f"not a JSON object: {value!r}"
    return {**value, "value": {"max": None, **value["value"]}}


async def test_a_denial_carries_the_matched_constraint_as_a_json_object(tmp_path: Path) -> None:
    rules = tmp_path / "permissions.yaml"
    rules.write_text(RULES)
    config = HarnessConfig.defaults().model_copy(
        update={
            "worker_config": {
                "policy": {"rules_path": str(rules), "reload_interval": 0},
                "orchestrator": {"policy_function": CHECK_PERMISSIONS.id},
            }
        }
    )
    call = {"function_id": "calc::add", "arguments": {"a": 1234, "b": 1}, "id": "c1"}
    script: list[dict[str, Any]] = [
        {"tool_calls": [call]},
        {"text": "Denied.", "expect": {"has_function_result_for": "c1"}},
    ]
    harness = Harness(
        "scripted:demo",
        config=config,
        home=tmp_path / "home",
        script=script,
        tools=["calc::*"],
        workers=["policy"],
    )
    async with harness:
        stream = harness.stream("add them", session="s1")
        gate = [event async for event in stream if isinstance(event, GateDecided)]
        result = stream.result
    assert result.output == "Denied."

    [decided] = gate
    assert decided.data.decision == "deny"
    assert decided.data.rule_id == "no-big-sums"
    assert _constraint_of(decided.data.matched_constraint) == CONSTRAINT

    [denial] = [m for m in result.messages if isinstance(m, FunctionResultMessage)]
    assert denial.details is not None
    assert denial.details["denied_by"] == "permissions"
    assert _constraint_of(denial.details["matched_constraint"]) == CONSTRAINT
    # as the model and a stored transcript see it: JSON through and through, no Python repr
    wire = json.dumps(denial.model_dump(mode="json"))
    assert "'arg'" not in wire
    assert '"matched_constraint": {"arg": "a"' in wire
