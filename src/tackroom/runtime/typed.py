"""Handlers over pydantic models: validate the request, publish schemas, dump the result."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from tackroom.contracts.bus import Function
from tackroom.engine.errors import FunctionError, InvocationError
from tackroom.engine.protocol import Handler, LazySchema

__all__ = [
    "ByReference",
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
    request_schema: LazySchema
    response_schema: LazySchema


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


class ByReference:
    """A raw handler that also takes its request as the pydantic model an in-process caller
    built (``takes_models``), passed by reference and read, never changed; from anywhere else
    it gets the JSON. The engine checks the attribute."""

    takes_models = True
    __slots__ = ("_handler",)

    def __init__(self, handler: Handler) -> None:
        self._handler = handler

    async def __call__(self, payload: Any) -> Any:
        return await self._handler(payload)


class _RequestHandler(Generic[RequestT]):
    """Validates the JSON payload as ``function``'s request, or takes the request model itself
    from an in-process caller (``takes_models``: the engine passes a model by reference when
    the handler says so; it was validated where it was built, and is read, never changed).

    Such a caller (:meth:`Function.call`) gets a model reply by reference too: it would only
    validate the JSON back into the same model. Any other caller gets the reply's JSON.
    """

    takes_models = True

    def __init__(self, function: Function[RequestT, Any], handler: ModelHandler[RequestT]) -> None:
        self._function = function
        self._handler = handler

    async def __call__(self, payload: Any) -> Any:
        model = self._function.request
        by_reference = isinstance(payload, model)
        if by_reference:
            request = payload
        else:
            if isinstance(payload, BaseModel):  # another model: read it as its JSON
                payload = payload.model_dump(mode="json")
            try:
                request = model.model_validate({} if payload is None else payload)
            except ValidationError as exc:
                raise FunctionError("invalid_request", describe_validation_error(exc)) from None
        result = await self._handler(request)
        if by_reference and self._function.is_response(result):
            return result
        return self._function.dump_response(result)


def typed_handler(
    function: Function[RequestT, Any], handler: ModelHandler[RequestT]
) -> TypedHandler:
    """Wrap ``handler`` so it takes ``function``'s JSON payload and returns a JSON result.

    A ``None`` payload validates as ``{}``, so a request model whose fields all have defaults
    can be called with no payload at all. The result is dumped by ``function``'s response type,
    whose adapter (for a type that is not a model) is built at the first call, not here.
    """
    return TypedHandler(
        handler=_RequestHandler(function, handler),
        request_schema=LazySchema(function.request.model_json_schema),
        response_schema=LazySchema(function.response_schema),
    )
