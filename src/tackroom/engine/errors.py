"""Typed errors of the engine bus.

Every error carries a stable ``code`` so it survives a trip across a wire (the local endpoint,
NATS) and can be rebuilt on the other side with :func:`error_from_wire`.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ChannelAborted",
    "ChannelClosed",
    "EngineClosed",
    "EngineCorrupt",
    "EngineError",
    "EngineLocked",
    "EngineStorageError",
    "EngineUnavailable",
    "FunctionError",
    "FunctionNotFound",
    "InvalidPayload",
    "InvalidSchedule",
    "InvalidUpdate",
    "InvocationError",
    "InvocationTimeout",
    "PermissionDenied",
    "RevisionConflict",
    "UnsafeDirectory",
    "UnsupportedEngineURL",
    "error_from_wire",
    "unavailable_cause",
]


class UnsupportedEngineURL(ValueError):
    """The engine URL names a scheme no backend serves, or is malformed for its backend."""


class EngineError(Exception):
    """Base of every error the engine raises."""

    code = "engine_error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def to_wire(self) -> dict[str, Any]:
        return {"type": type(self).__name__, "code": self.code, "message": self.message}


class FunctionNotFound(EngineError):
    """No worker serves ``function_id``; ``suggestions`` holds close matches."""

    code = "function_not_found"

    def __init__(self, function_id: str, suggestions: list[str] | None = None) -> None:
        self.function_id = function_id
        self.suggestions = list(suggestions or [])
        hint = f"; did you mean {', '.join(self.suggestions)}?" if self.suggestions else ""
        super().__init__(f"no worker serves function {function_id!r}{hint}")

    def to_wire(self) -> dict[str, Any]:
        return {
            **super().to_wire(),
            "function_id": self.function_id,
            "suggestions": self.suggestions,
        }


class InvocationTimeout(EngineError):
    """The function did not answer within ``timeout`` seconds."""

    code = "invocation_timeout"

    def __init__(self, function_id: str, timeout: float) -> None:
        self.function_id = function_id
        self.timeout = timeout
        super().__init__(f"function {function_id!r} did not answer within {timeout:g}s")

    def to_wire(self) -> dict[str, Any]:
        return {**super().to_wire(), "function_id": self.function_id, "timeout": self.timeout}


class PermissionDenied(EngineError):
    """The bus refused an operation to this worker: its grant (``worker_grants`` embedded) or its
    user's authorization on the NATS server does not allow it."""

    code = "permission_denied"


class FunctionError(EngineError):
    """Raised by a handler to report a failure with a code of its own choosing.

    The caller of :meth:`Engine.trigger` receives it as an :class:`InvocationError` with the same
    ``code`` and ``message``.
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class InvocationError(EngineError):
    """The handler of ``function_id`` failed; ``remote_code`` and ``message`` are its own."""

    code = "invocation_error"

    def __init__(self, function_id: str, remote_code: str, message: str) -> None:
        self.function_id = function_id
        self.remote_code = remote_code
        super().__init__(message)

    def __str__(self) -> str:
        return f"{self.function_id}: [{self.remote_code}] {self.message}"

    def to_wire(self) -> dict[str, Any]:
        return {
            **super().to_wire(),
            "function_id": self.function_id,
            "remote_code": self.remote_code,
        }


class RevisionConflict(EngineError):
    """A compare-and-set write found another revision than the one it expected."""

    code = "revision_conflict"

    def __init__(self, scope: str, key: str, expected: int, actual: int) -> None:
        self.scope = scope
        self.key = key
        self.expected = expected
        self.actual = actual
        super().__init__(
            f"state {scope}/{key}: expected revision {expected}, found {actual}"
            + (" (absent)" if actual == 0 else "")
        )

    def to_wire(self) -> dict[str, Any]:
        return {
            **super().to_wire(),
            "scope": self.scope,
            "key": self.key,
            "expected": self.expected,
            "actual": self.actual,
        }


class InvalidPayload(EngineError):
    """A payload, result or stored value is not a JSON value."""

    code = "invalid_payload"


class InvalidUpdate(EngineError):
    """An atomic update op does not apply to the stored value (wrong type, bad path)."""

    code = "invalid_update"


class InvalidSchedule(EngineError):
    """A cron schedule does not parse."""

    code = "invalid_schedule"


class ChannelClosed(EngineError):
    """A frame was sent on a channel that is already closed or aborted."""

    code = "channel_closed"


class ChannelAborted(EngineError):
    """The writer aborted the channel; ``reason`` says why."""

    code = "channel_aborted"

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(f"channel aborted: {reason}")


class EngineClosed(EngineError):
    """The engine is closed (or not started) and cannot take the call."""

    code = "engine_closed"


class EngineLocked(EngineError):
    """Another process already owns this embedded engine's database file."""

    code = "engine_locked"


class EngineUnavailable(EngineError):
    """The engine's transport is down (a networked backend lost its server).

    A call that was in flight when the connection dropped may or may not have run; retry only
    what is idempotent.
    """

    code = "engine_unavailable"


class EngineStorageError(EngineUnavailable):
    """The embedded engine's database file refused a read or write: the disk is full, the file
    or its directory is read-only, another program holds it locked, an I/O error.

    A write that raised it wrote nothing; the same call may work once the cause is gone.
    """

    code = "engine_storage"


class EngineCorrupt(EngineError):
    """The embedded engine's database file is damaged, or is not a tackroom engine database."""

    code = "engine_corrupt"


class UnsafeDirectory(EngineError):
    """The directory of the engine's files (database, socket) is writable by other users, who
    could rename those files away and put their own in their place."""

    code = "unsafe_directory"


def unavailable_cause(exc: BaseException) -> EngineUnavailable | None:
    """The :class:`EngineUnavailable` behind a handler's failure, if that is why it failed.

    Looks through ``raise ... from`` chains and exception groups; a nested call that failed for
    that reason counts too (an :class:`InvocationError` with its code).
    """
    seen: set[int] = set()
    pending: list[BaseException] = [exc]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, EngineUnavailable):
            return current
        if isinstance(current, InvocationError) and current.remote_code in _UNAVAILABLE_CODES:
            return EngineUnavailable(f"{current.function_id}: {current.message}")
        if isinstance(current, BaseExceptionGroup):
            pending.extend(current.exceptions)
        if current.__cause__ is not None:
            pending.append(current.__cause__)
        elif current.__context__ is not None and not current.__suppress_context__:
            pending.append(current.__context__)
    return None


_UNAVAILABLE_CODES = frozenset({EngineUnavailable.code, EngineStorageError.code})


def error_from_wire(wire: dict[str, Any]) -> EngineError:
    """Rebuild a typed error from :meth:`EngineError.to_wire` output."""
    kind = wire.get("type")
    message = str(wire.get("message", ""))
    if kind == "FunctionNotFound":
        return FunctionNotFound(str(wire["function_id"]), list(wire.get("suggestions", [])))
    if kind == "InvocationTimeout":
        return InvocationTimeout(str(wire["function_id"]), float(wire["timeout"]))
    if kind == "InvocationError":
        return InvocationError(str(wire["function_id"]), str(wire["remote_code"]), message)
    if kind == "RevisionConflict":
        return RevisionConflict(
            str(wire["scope"]), str(wire["key"]), int(wire["expected"]), int(wire["actual"])
        )
    simple: dict[str, type[EngineError]] = {
        cls.__name__: cls
        for cls in (
            InvalidPayload,
            InvalidSchedule,
            InvalidUpdate,
            ChannelClosed,
            EngineClosed,
            EngineCorrupt,
            EngineLocked,
            EngineStorageError,
            EngineUnavailable,
            PermissionDenied,
            UnsafeDirectory,
        )
    }
    if isinstance(kind, str) and kind in simple:
        return simple[kind](message)
    if kind == "ChannelAborted":
        return ChannelAborted(str(wire.get("reason", message)))
    err = EngineError(message)
    err.code = str(wire.get("code", EngineError.code))
    return err
