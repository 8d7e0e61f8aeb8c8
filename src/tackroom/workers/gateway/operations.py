"""One route as data: its method, path, handler, and the models of what it reads and answers —
the app's routes and the OpenAPI document are both built from the same list."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict
from starlette.requests import Request
from starlette.responses import Response

__all__ = ["Endpoint", "Operation", "PathParam", "Query"]

Endpoint = Callable[[Request], Awaitable[Response]]


class Query(BaseModel):
    """Base of a route's query parameters: unknown ones are ignored, values coerced from text."""

    model_config = ConfigDict(extra="ignore", defer_build=True)


@dataclass(frozen=True, slots=True)
class PathParam:
    name: str
    description: str
    pattern: str


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
    path_params: tuple[PathParam, ...] = ()
    response: Any = None
    """A model, a ``RootModel``-free schema (``dict``), or ``None`` for an empty body."""
    status: int = 200
    errors: tuple[int, ...] = ()
    public: bool = False
    event_stream: bool = False
    headers: tuple[tuple[str, str], ...] = field(default=())
    """Request headers read (name, description), e.g. ``Last-Event-ID``."""
