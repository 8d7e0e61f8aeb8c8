"""Typed errors of the runtime: config, worker discovery, hosting and the local endpoint."""

from __future__ import annotations

from pathlib import Path

from tackroom.engine.errors import EngineError

__all__ = [
    "ConfigError",
    "EndpointError",
    "EndpointInUse",
    "EndpointUnavailable",
    "FrameTooLarge",
    "HarnessError",
    "InvalidFrame",
    "TooManyStreams",
    "UnknownStreamHandle",
    "UnknownWorker",
    "WorkerCrashed",
    "WorkerLoadError",
    "WorkerStartError",
]


class HarnessError(Exception):
    """Base of the runtime's own errors (the bus's errors derive from ``EngineError``)."""


class ConfigError(HarnessError):
    """The config file does not parse or does not validate.

    ``field`` is the dotted path of the offending key (``tracing.exporter``) and ``line`` its
    1-based line in ``path`` when known.
    """

    def __init__(
        self,
        path: Path | None,
        reason: str,
        *,
        field: str | None = None,
        line: int | None = None,
    ) -> None:
        self.path = path
        self.reason = reason
        self.field = field
        self.line = line
        where = str(path) if path is not None else "<config>"
        if line is not None:
            where += f":{line}"
        if field:
            where += f": {field}"
        super().__init__(f"{where}: {reason}")


class UnknownWorker(HarnessError):
    """No worker is registered under ``name``; ``suggestions`` holds close names."""

    def __init__(self, name: str, *, suggestions: list[str], known: list[str]) -> None:
        self.name = name
        self.suggestions = suggestions
        self.known = known
        hint = (
            f"; did you mean {', '.join(suggestions)}?"
            if suggestions
            else f" (known: {', '.join(known) or 'none'})"
        )
        super().__init__(f"unknown worker {name!r}{hint}")


class WorkerLoadError(HarnessError):
    """A worker's entry point exists but does not import or is not a ``WorkerSpec``."""


class WorkerStartError(HarnessError):
    """A worker's ``start`` raised; the host rolled back everything started before it."""

    def __init__(self, worker: str, cause: BaseException) -> None:
        self.worker = worker
        super().__init__(f"worker {worker!r} failed to start: {type(cause).__name__}: {cause}")


class WorkerCrashed(HarnessError):
    """A background task owned by ``worker`` failed; the host shut down."""

    def __init__(self, worker: str, task_name: str, cause: BaseException) -> None:
        self.worker = worker
        self.task_name = task_name
        super().__init__(
            f"worker {worker!r}: task {task_name!r} failed: {type(cause).__name__}: {cause}"
        )


class EndpointError(HarnessError):
    """The local endpoint cannot listen on its socket path."""


class EndpointInUse(EndpointError):
    """A live process already listens on the endpoint's socket path."""

    def __init__(self, path: Path) -> None:
        self.path = path
        super().__init__(
            f"another tackroom process is listening on {path}; stop it or choose another "
            "endpoint.socket"
        )


class EndpointUnavailable(EngineError):
    """The client cannot reach a local endpoint (none listening, or the connection dropped)."""

    code = "endpoint_unavailable"


class InvalidFrame(EngineError):
    """A frame on the local endpoint is not valid JSON or not a valid request.

    ``frame_id`` is the request's id when the frame had a usable one.
    """

    code = "invalid_frame"

    def __init__(self, message: str, *, frame_id: str | int | None = None) -> None:
        super().__init__(message)
        self.frame_id = frame_id


class FrameTooLarge(EngineError):
    """A frame on the local endpoint is longer than the endpoint's frame limit."""

    code = "frame_too_large"


class UnknownStreamHandle(EngineError):
    """No subscription of this connection has the handle: it was closed (by the client, by the
    endpoint's idle timeout) or opened on another connection."""

    code = "unknown_stream_handle"


class TooManyStreams(EngineError):
    """The connection holds as many open subscriptions as the endpoint allows one."""

    code = "too_many_streams"
