"""The runtime: config, worker specs and contexts, the host, and the local endpoint."""

from __future__ import annotations

from tackroom.runtime.client import LocalClient
from tackroom.runtime.config import (
    DEFAULT_CONFIG_PATH,
    EndpointSettings,
    HarnessConfig,
    TracingSettings,
    load_config,
)
from tackroom.runtime.endpoint import LocalEndpoint
from tackroom.runtime.errors import (
    ConfigError,
    EndpointError,
    EndpointInUse,
    EndpointUnavailable,
    FrameTooLarge,
    HarnessError,
    InvalidFrame,
    TooManyStreams,
    UnknownStreamHandle,
    UnknownWorker,
    WorkerCrashed,
    WorkerLoadError,
    WorkerStartError,
)
from tackroom.runtime.host import Host
from tackroom.runtime.registry import available_workers, load_worker
from tackroom.runtime.worker import WorkerConfig, WorkerContext, WorkerSpec

__all__ = [
    "DEFAULT_CONFIG_PATH",
    "ConfigError",
    "EndpointError",
    "EndpointInUse",
    "EndpointSettings",
    "EndpointUnavailable",
    "FrameTooLarge",
    "HarnessConfig",
    "HarnessError",
    "Host",
    "InvalidFrame",
    "LocalClient",
    "LocalEndpoint",
    "TooManyStreams",
    "TracingSettings",
    "UnknownStreamHandle",
    "UnknownWorker",
    "WorkerConfig",
    "WorkerContext",
    "WorkerCrashed",
    "WorkerLoadError",
    "WorkerSpec",
    "WorkerStartError",
    "available_workers",
    "load_config",
    "load_worker",
]
