"""The ``scripted`` worker: a :class:`ScriptedProvider` booted from its config section.

```yaml
workers: [engine, scripted, ...]
worker_config:
  scripted:
    script_path: scripts/demo.yaml   # or `script: [...]` inline; .jsonl is JSON Lines
    per_session: true                 # each session replays its own copy
    cursor: transcript                # pick turns from the request (survives a restart)
    cursor_state: engine              # calls counted in engine state: replicas answer as one
```
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, field_validator, model_validator

from tackroom.runtime.worker import WorkerConfig, WorkerContext, WorkerSpec
from tackroom.testing.scripted.cursors import CursorMode, CursorState
from tackroom.testing.scripted.provider import ScriptedProvider
from tackroom.testing.scripted.script import Chunking, Script

__all__ = ["WORKER", "ScriptedConfig"]


class ScriptedConfig(WorkerConfig):
    """The ``scripted`` worker's section: a script inline or in a file (exactly one)."""

    script: list[dict[str, Any]] | None = Field(
        default=None, description="the turns, inline (same fields as a YAML script)"
    )
    script_path: Path | None = Field(
        default=None, description="a YAML or JSONL script file (relative to the working dir)"
    )
    per_session: bool = False
    cursor: CursorMode = Field(
        default="calls",
        description="calls: each call takes the next turn; transcript: a request holding N"
        " assistant messages gets turn N (survives a restart, replays a repeated call)",
    )
    cursor_state: CursorState = Field(
        default="engine",
        description="where calls are counted: engine (state on the bus: every replica of the"
        " provider takes the next turn of one count) or process (this worker's memory)",
    )
    name: str = Field(default="scripted", pattern=r"^[a-zA-Z0-9_-]+$")
    deltas: Chunking | None = Field(
        default=None, description="text chunking; default: the script's own ('words')"
    )
    argument_deltas: Chunking | None = None
    record_requests: bool = Field(
        default=True, description="keep every request (turn off for long benchmarks)"
    )

    @field_validator("script")
    @classmethod
    def _valid_script(cls, value: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
        if value is not None:
            Script(value)  # raises InvalidScript (a ValueError) naming the step
        return value

    @model_validator(mode="after")
    def _one_source(self) -> ScriptedConfig:
        if (self.script is None) == (self.script_path is None):
            raise ValueError("give exactly one of script (inline turns) or script_path")
        return self

    def load_script(self) -> Script:
        """The script, with this section's ``deltas``/``argument_deltas`` when they are set."""
        if self.script_path is not None:
            script = Script.load(self.script_path)
        else:
            script = Script(self.script or [])
        if self.deltas is None and self.argument_deltas is None:
            return script
        return Script(
            script.turns,
            deltas=script.deltas if self.deltas is None else self.deltas,
            argument_deltas=(
                script.argument_deltas if self.argument_deltas is None else self.argument_deltas
            ),
            source=script.source,
        )


async def _start(ctx: WorkerContext[ScriptedConfig]) -> None:
    config = ctx.config
    provider = ScriptedProvider(
        config.load_script(),
        per_session=config.per_session,
        cursor=config.cursor,
        cursor_state=config.cursor_state,
        name=config.name,
        record_requests=config.record_requests,
    )
    await provider.start_in(ctx)


WORKER = WorkerSpec(
    name="scripted",
    description="A provider that replays a script (text, tool calls, errors) for tests and demos.",
    config_model=ScriptedConfig,
    start=_start,
)
