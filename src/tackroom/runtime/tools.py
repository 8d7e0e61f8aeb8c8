"""Register a function meant to be offered to models as a tool.

The handler gets validated arguments and the orchestrator's :class:`CallContext` (``_call``
split off the payload); the request schema is published with the tool's traits (idempotent,
parallel) so the orchestrator reads them from the catalog. :func:`serve_tool` serves a
:class:`~tackroom.contracts.bus.Tool` descriptor (id, models and traits declared in its contract
module); :func:`register_tool` is the same with each part given by hand.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from tackroom.contracts.bus import Tool
from tackroom.contracts.tools import CallContext, ToolTraits, model_schema, split_call
from tackroom.engine.errors import FunctionError
from tackroom.engine.protocol import LazySchema, Registration
from tackroom.runtime.typed import describe_validation_error
from tackroom.runtime.worker import WorkerContext

__all__ = ["ToolHandler", "register_tool", "serve_tool"]

RequestT = TypeVar("RequestT", bound=BaseModel)
ResponseT = TypeVar("ResponseT", bound=BaseModel)

ToolHandler = Callable[[RequestT, CallContext | None], Awaitable[BaseModel]]


async def serve_tool(
    ctx: WorkerContext[Any],
    tool: Tool[RequestT, ResponseT],
    handler: Callable[[RequestT, CallContext | None], Awaitable[ResponseT]],
    *,
    description: str | None = None,
) -> Registration:
    """Serve ``tool``'s contract with ``handler`` (validated arguments and the call context in,
    its response model out), publishing the tool's traits; ``description`` overrides the
    descriptor's (a limit taken from the worker's config, say)."""
    return await register_tool(
        ctx,
        tool.id,
        handler,
        request_model=tool.request,
        response_model=tool.response,
        description=tool.description if description is None else description,
        idempotent=tool.idempotent,
        parallel=tool.parallel,
        traits=ToolTraits(
            idempotent=tool.idempotent,
            parallel=tool.parallel,
            read_only=tool.read_only,
            timeout=tool.timeout,
            required_permission=tool.required_permission,
            max_result_chars=tool.max_result_chars,
            on_policy_error=tool.on_policy_error,
            untrusted_output=tool.untrusted_output,
            side_effect=tool.side_effect,
            sinks=list(tool.sinks),
        ),
        contract_version=tool.contract_version,
    )


async def register_tool(
    ctx: WorkerContext[Any],
    function_id: str,
    handler: ToolHandler[RequestT],
    *,
    request_model: type[RequestT],
    response_model: type[BaseModel],
    description: str,
    idempotent: bool,
    parallel: bool,
    traits: ToolTraits | None = None,
    contract_version: int | None = None,
) -> Registration:
    async def run(payload: Any) -> Any:
        arguments, call = split_call({} if payload is None else payload)
        try:
            request = request_model.model_validate(arguments)
        except ValidationError as exc:
            raise FunctionError("invalid_request", describe_validation_error(exc)) from None
        return (await handler(request, call)).model_dump(mode="json")

    return await ctx.register_function(
        function_id,
        run,
        description=description,
        request_schema=LazySchema(
            lambda: model_schema(
                request_model, idempotent=idempotent, parallel=parallel, traits=traits
            )
        ),
        response_schema=LazySchema(response_model.model_json_schema),
        contract_version=contract_version,
    )
