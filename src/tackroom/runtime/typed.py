"""Handlers over pydantic models: validate the request, publish schemas, dump the result."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError

from tackroom.contracts.bus import Function
from tackroom.engine.errors import FunctionError, InvocationError
from tackroom.engine.protocol import Handler

__all__ = [
    "ModelHandler",
    "TypedHandler",
    "describe_validation_error",
    "request_for",
    "typed_handler",
]

RequestT = TypeVar("RequestT", bound=BaseModel)

ModelHandler = Callable[[RequestT], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class TypedHandler:
    handler: Handler
    request_schema: dict[str, Any]
    response_schema: dict[str, Any]


def describe_validation_error(exc: ValidationError) -> str:
    """pydantic's reasons, one per error, as ``field.path: message`` joined by ``; ``."""
    parts = []
    for error in exc.errors(include_url=False):
        loc = ".".join(str(part) for part in error["loc"])
        parts.append(f"{loc}: {error['msg']}" if loc else str(error["msg"]))
    return "; ".join(parts)


def request_for(function: Function[RequestT, Any], **fields: Any) -> RequestT:
    """``function``'s request from ``fields`` (a person's input, say), or the error its worker
    would answer: ``InvocationError`` with ``invalid_request`` and pydantic's reason."""
    try:
        return function.request.model_validate(fields)
    except ValidationError as exc:
        raise InvocationError(
            function.id, "invalid_request", describe_validation_error(exc)
        ) from None


def typed_handler(
    handler: ModelHandler[RequestT], *, request_model: type[RequestT], response_type: Any
) -> TypedHandler:
    """Wrap ``handler`` so it takes a JSON payload and returns a JSON result.

    A ``None`` payload validates as ``{}``, so a request model whose fields all have defaults
    can be called with no payload at all.
    """
    response = TypeAdapter[Any](response_type)

    async def run(payload: Any) -> Any:
        try:
            request = request_model.model_validate({} if payload is None else payload)
        except ValidationError as exc:
            raise FunctionError("invalid_request", describe_validation_error(exc)) from None
        return response.dump_python(await handler(request), mode="json")

    return TypedHandler(
        handler=run,
        request_schema=request_model.model_json_schema(),
        response_schema=response.json_schema(),
    )
