"""Failures of an MCP server or of a request to it, as one readable line or a typed error."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, INVALID_PARAMS, REQUEST_TIMEOUT

from tackroom.contracts.mcp import CALL_INTERRUPTED, MCP_ERROR, TIMEOUT
from tackroom.engine.errors import FunctionError
from tackroom.workers.mcp.secrets import SecretUnavailable

__all__ = ["describe", "interrupted", "mask", "public_url", "request_error"]


def public_url(url: str) -> str:
    """``url`` without userinfo, query or fragment (where credentials hide)."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def mask(text: str, secrets: list[str]) -> str:
    for secret in sorted((s for s in secrets if len(s) >= 4), key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    else:
        yield exc


def _one(exc: BaseException) -> str:
    if isinstance(exc, SecretUnavailable):
        return str(exc)
    if isinstance(exc, TimeoutError):
        return "no answer within connect_timeout"
    if isinstance(exc, MCPError):
        if exc.code == CONNECTION_CLOSED:
            return "the server closed the connection"
        return f"{exc.message} (MCP error {exc.code})"
    if isinstance(exc, FileNotFoundError):
        return f"cannot start {exc.filename or 'the command'}: no such file or directory"
    if isinstance(exc, PermissionError):
        return f"cannot start {exc.filename or 'the command'}: permission denied"
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def describe(exc: BaseException, *, secrets: list[str]) -> str:
    """``exc`` (or the distinct leaves of an exception group) in one line, secrets masked."""
    parts: list[str] = []
    for leaf in _leaves(exc):
        text = _one(leaf)
        if text not in parts:
            parts.append(text)
    return mask("; ".join(parts[:3]), secrets)[:500]


def interrupted(server: str, what: str) -> FunctionError:
    return FunctionError(
        CALL_INTERRUPTED,
        f"the connection to MCP server {server!r} ended while {what} was running: it may or "
        "may not have had its effect; the bridge is reconnecting",
    )


def request_error(server: str, what: str, exc: MCPError, *, timeout: float) -> FunctionError:
    """The typed error for an MCP error answer to ``what`` (a tool call, a read)."""
    if exc.code == REQUEST_TIMEOUT:
        return FunctionError(
            TIMEOUT,
            f"MCP server {server!r} did not answer {what} within {timeout:g}s; the request was "
            "cancelled",
        )
    if exc.code == INVALID_PARAMS:
        return FunctionError(
            "invalid_request", f"MCP server {server!r} refused {what}: {exc.message}"
        )
    return FunctionError(
        MCP_ERROR, f"MCP server {server!r} failed {what}: {exc.message} (MCP error {exc.code})"
    )
