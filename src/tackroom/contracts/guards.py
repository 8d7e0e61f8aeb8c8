"""The turn's loop guards: how often the model may go round the same tool before the run stops.

Two guards, both decided inside the durable turn (a step of it, committed like any other):

- **the same tool, in a row, whatever its arguments** (seed 003's case: a query service kept
  answering an edge case, and the model kept querying it with shifting arguments): a model turn
  whose calls are all of one tool extends that tool's streak, any other turn ends it. A streak
  longer than the tool's limit (:attr:`LoopGuard.same_tool_limit`, or its entry in
  :attr:`LoopGuard.per_tool`) is steered once — the calls of that turn do not run, each gets a
  result telling the model it is looping and what to do instead — and if the model's next turn
  calls the tool again, the run stops with ``stop_reason: "tool_loop"``;
- **the identical call** (function and arguments) made more than
  :attr:`LoopGuard.identical_call_limit` times in a run stops it (``loop_detected``).

``worker_config.orchestrator.loop_guard`` sets them for every run; a run keeps the settings it
started with.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from tackroom.contracts.policy import function_glob

__all__ = ["DEFAULT_PER_TOOL", "SAME_TOOL_LIMIT", "LoopGuard"]

SAME_TOOL_LIMIT = 3
"""Seed 003: "连续调用同一个工具超过 3 次就强制终止" — more than 3 calls of the same tool in a
row end the loop."""

DEFAULT_PER_TOOL: dict[str, int | None] = {"results::read": None}
"""Tools that go round legitimately: paging through one clipped result is ``results::read``
again and again. Entries the config names are merged over these."""

_Limit = Annotated[int, Field(ge=1, le=1000)]


class LoopGuard(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = 1
    same_tool_limit: _Limit | None = Field(
        default=SAME_TOOL_LIMIT,
        description="model turns in a row calling only one tool before the model is steered "
        "once (the next one stops the run); null: no limit",
    )
    per_tool: dict[str, _Limit | None] = Field(
        default_factory=lambda: dict(DEFAULT_PER_TOOL),
        description="function id or glob (`*` matches anything) → that tool's own limit "
        "(null: none); merged over the defaults, an exact id before the globs in their order",
    )
    identical_call_limit: _Limit = Field(
        default=3,
        description="the same call (function and arguments) more than this many times in a run "
        "stops it",
    )

    @field_validator("per_tool", mode="before")
    @classmethod
    def _over_defaults(cls, value: Any) -> Any:
        return {**DEFAULT_PER_TOOL, **value} if isinstance(value, dict) else value

    def limit_for(self, function_id: str) -> int | None:
        """The same-tool limit of ``function_id`` (``None``: it may go on)."""
        if function_id in self.per_tool:
            return self.per_tool[function_id]
        for pattern, limit in self.per_tool.items():
            if "*" in pattern and function_glob(pattern).fullmatch(function_id):
                return limit
        return self.same_tool_limit
