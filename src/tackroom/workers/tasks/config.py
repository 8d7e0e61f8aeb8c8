"""The ``tasks`` worker's config section."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from tackroom.runtime.worker import WorkerConfig

__all__ = ["Schedule", "TasksConfig"]


class Schedule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    cron: str
    graph: Path
    inputs: dict[str, Any] = Field(default_factory=dict)


class TasksConfig(WorkerConfig):
    call_timeout: float = Field(default=60.0, gt=0)
    agent_timeout: float = Field(default=1800.0, gt=0)
    max_deliveries: int = Field(default=20, ge=1)
    visibility_timeout: float = Field(default=120.0, gt=0)
    concurrency: int = Field(default=64, ge=1)
    schedules: list[Schedule] = Field(default_factory=list)
    execute: bool = Field(
        default=True,
        description="run steps here; false: serve tasks::* only (a CLI command that controls"
        " runs must not start executing them in its own process)",
    )
