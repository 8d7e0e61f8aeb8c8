"""One route as data: its method, path, handler, and the models of what it reads and answers —
the app's routes and the OpenAPI document are both built from the same list."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict
from starlette.requests import Request
from starlette.responses import Response

from tackroom.contracts import approvals, sessions
from tackroom.contracts.principal import TENANT_PATTERN

__all__ = ["PATH_PARAMS", "Endpoint", "Operation", "PathParam", "Query"]

Endpoint = Callable[[Request], Awaitable[Response]]


class Query(BaseModel):
    """Base of a route's query parameters: unknown ones are ignored, values coerced from text."""

    model_config = ConfigDict(extra="ignore", defer_build=True)


@dataclass(frozen=True, slots=True)
class PathParam:
    name: str
    description: str
    pattern: str


PATH_PARAMS = {
    param.name: param
    for param in (
        PathParam("sid", "a session id", sessions.ID_PATTERN),
        PathParam("eid", "an entry id of the session", sessions.ID_PATTERN),
        PathParam("call_id", "the function call id", approvals.ID_PATTERN),
        PathParam("trace_id", "32 lowercase hex digits", r"^[0-9a-f]{32}$"),
        PathParam("tenant", "the caller's own tenant", TENANT_PATTERN),
    )
}
"""Every ``{name}`` a route's path may hold, by name: an operation's path parameters are these."""

_PLACEHOLDER = re.compile(r"\{(\w+)\}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Operation:
    method: Literal["GET", "POST", "PATCH", "DELETE"]
    path: str
    endpoint: Endpoint
    operation_id: str
    summary: str
    tag: str
    body: type[BaseModel] | None = None
    query: type[Query] | None = None
    response: Any = None
    """A model, a ``RootModel``-free schema (``dict``), or ``None`` for an empty body."""
    status: int = 200
    errors: tuple[int, ...] = ()
    """Error statuses of the route's own, beyond those the OpenAPI document derives from the
    rest: 401 and 403 unless ``public``; 400, 413 and 422 with a ``body``; 404 and 422 with
    ``path_params``; 422 with a ``query``."""
    public: bool = False
    event_stream: bool = False
    headers: tuple[tuple[str, str], ...] = field(default=())
    """Request headers read (name, description), e.g. ``Last-Event-ID``."""

    def __post_init__(self) -> None:
        unknown = [name for name in self._placeholders() if name not in PATH_PARAMS]
        if unknown:
            raise ValueError(f"{self.path}: no PathParam in PATH_PARAMS for {unknown}")

    @property
    def path_params(self) -> tuple[PathParam, ...]:
        """The parameters of the path's ``{name}`` placeholders, in order."""
        return tuple(PATH_PARAMS[name] for name in self._placeholders())

    def _placeholders(self) -> list[str]:
        return _PLACEHOLDER.findall(self.path)
