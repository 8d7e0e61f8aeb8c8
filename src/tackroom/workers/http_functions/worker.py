"""The ``http-functions`` worker: functions hosted by HTTP endpoints, for languages with no SDK.

Each entry of ``worker_config.http-functions.functions`` is registered as a function with its
request schema and traits (an id under ``tool::`` is a tool the application offers its model, as
``Harness.tool`` ones are). A call's arguments, and the orchestrator's call context under
``_call`` when there is one, are POSTed as JSON to the function's URL with its headers; a 2xx
JSON body is the result. Errors are typed: see :mod:`~tackroom.workers.http_functions.answers`.
See ``docs/workers/http-functions.md`` and :mod:`~tackroom.workers.http_functions.config`.

The URLs are the operator's, fixed in config (a model picks arguments, never where they go), so
the ``http`` worker's egress rules for ``http::fetch`` do not apply; redirects are not followed.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable
from typing import Any

from tackroom.contracts.tools import CALL_CONTEXT_KEY, with_traits
from tackroom.engine.errors import FunctionError
from tackroom.runtime.worker import WorkerContext, WorkerSpec
from tackroom.workers.http_functions.answers import one_line, schema_validator
from tackroom.workers.http_functions.config import FunctionConfig, HttpFunctionsConfig
from tackroom.workers.http_functions.remote import Endpoint, Remote

__all__ = ["WORKER", "HttpFunctionsConfig"]

_log = logging.getLogger("tackroom.workers.http_functions")


def _handler(function: FunctionConfig, endpoint: Endpoint) -> Callable[[Any], Awaitable[Any]]:
    validator = schema_validator(function.request_schema)

    async def handle(payload: Any) -> Any:
        if payload is None:
            payload = {}
        if not isinstance(payload, dict):
            raise FunctionError(
                "invalid_request", f"the arguments of {function.id} must be a JSON object"
            )
        arguments = {key: value for key, value in payload.items() if key != CALL_CONTEXT_KEY}
        errors = sorted(validator.iter_errors(arguments), key=lambda e: list(e.absolute_path))
        if errors:
            reasons = "; ".join(
                f"{'/'.join(str(p) for p in e.absolute_path) or '(arguments)'}: {e.message}"
                for e in errors[:5]
            )
            raise FunctionError("invalid_request", one_line(reasons))
        # The call context (session, call id, principal) goes to the endpoint as it came: a
        # remote can key its own idempotency on _call.function_call_id.
        return await endpoint.call(payload)

    return handle


async def _start(ctx: WorkerContext[HttpFunctionsConfig]) -> None:
    config = ctx.config
    remote = Remote(config)
    if config.functions:
        ctx.spawn(remote.hold(), name="http-functions client")
    for function in config.functions:
        unset = [name for name in function.variables() if name not in os.environ]
        if unset:
            _log.warning(
                "http-functions: %s names the environment variable(s) %s, not set: its calls fail"
                " with secret_unavailable until they are",
                function.id, ", ".join(unset),
            )  # fmt: skip
        traits = config.traits(function)
        await ctx.register_function(
            function.id,
            _handler(function, Endpoint(remote, config, function)),
            description=function.description or f"{function.id}, served over HTTP.",
            request_schema=with_traits(function.request_schema, traits),
            response_schema=function.response_schema,
        )


WORKER = WorkerSpec(
    name="http-functions",
    description="Functions served by HTTP endpoints in any language (POST JSON, typed errors,"
    " retries of idempotent calls).",
    config_model=HttpFunctionsConfig,
    start=_start,
)
