"""The ``sandbox`` worker's config section (``worker_config.sandbox``)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from tackroom.contracts.sandbox import MAX_TIMEOUT, Level, Limits
from tackroom.runtime.worker import WorkerConfig

__all__ = ["SandboxConfig"]

_MIB = 1024 * 1024


class SandboxConfig(WorkerConfig):
    workspace_root: Path = Field(
        default=Path(".tackroom/workspaces"),
        description="where session workspaces live, <root>/<session_id>/: the files worker's"
        " workspace_root, so what a command writes is what fs::read sees",
    )
    level: Level = Field(
        default="bwrap",
        description="bwrap: isolated by bubblewrap (refuses to run where it cannot); process:"
        " an opt-in weaker level, limits and a timeout but the host's files and network",
    )
    network: bool = Field(default=False, description="share the host's network with commands")
    memory_mb: int = Field(default=1024, ge=16, description="address space of each process")
    cpu_seconds: int = Field(default=60, ge=1, description="CPU time of each process")
    max_processes: int = Field(default=128, ge=2, description="processes of one call at once")
    max_file_bytes: int = Field(default=64 * _MIB, ge=1, description="largest file written")
    max_open_files: int = Field(default=256, ge=16)
    max_output_bytes: int = Field(default=64 * 1024, ge=1, description="kept per stream")
    tmp_mb: int = Field(default=256, ge=1, description="size of each call's /tmp and /dev/shm")
    default_timeout: float = Field(default=30.0, gt=0, le=MAX_TIMEOUT)
    bwrap: str = Field(default="bwrap", description="the bubblewrap program (name or path)")

    def limits(self) -> Limits:
        return Limits(
            memory_mb=self.memory_mb,
            cpu_seconds=self.cpu_seconds,
            max_processes=self.max_processes,
            max_file_bytes=self.max_file_bytes,
            max_open_files=self.max_open_files,
            max_output_bytes=self.max_output_bytes,
            tmp_mb=self.tmp_mb,
            default_timeout=self.default_timeout,
        )
