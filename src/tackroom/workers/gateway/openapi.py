"""The OpenAPI 3.1 document of the gateway, built from its operations and the contract models'
JSON schemas (pydantic's), so it cannot drift from what the routes validate and answer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, RootModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from tackroom.contracts.events import AgentEvent
from tackroom.contracts.gateway import ErrorResponse
from tackroom.workers.gateway.operations import Operation

__all__ = ["OPENAPI_VERSION", "document"]

OPENAPI_VERSION = "3.1.0"
_REF = "#/components/schemas/{model}"

_REASONS = {
    200: "OK",
    201: "Created",
    202: "Accepted",
    204: "No Content",
    400: "The body is not a JSON object",
    401: "No credential, or one refused (unknown, expired, revoked, not verified)",
    403: "The caller's roles do not grant this action",
    404: "Unknown id (another tenant's is unknown too)",
    409: "Conflicts with the current state",
    413: "The body is over the size limit",
    422: "A value does not validate",
    429: "A rate limit or concurrency cap of the tenant or user (see Retry-After)",
    503: "The engine or a worker is unavailable, or a limit is reached",
}


class AgentEventFrame(RootModel[AgentEvent]):
    """One typed event of ``agent::events`` (the ``data`` of an SSE event)."""


def document(operations: Sequence[Operation], *, version: str) -> dict[str, Any]:
    refs, schemas = _schemas(operations)
    paths: dict[str, dict[str, Any]] = {}
    for op in operations:
        paths.setdefault(op.path, {})[op.method.lower()] = _operation(op, refs)
    return {
        "openapi": OPENAPI_VERSION,
        "info": {
            "title": "tackroom gateway",
            "version": version,
            "description": "The harness over HTTP: runs, sessions, events (SSE), approvals,"
            " budgets, catalogs. Every 4xx/5xx body is an ErrorResponse.",
        },
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
        "tags": [{"name": tag} for tag in dict.fromkeys(op.tag for op in operations)],
    }


def _schemas(
    operations: Sequence[Operation],
) -> tuple[dict[tuple[type[BaseModel], JsonSchemaMode], Any], dict[str, Any]]:
    wanted: list[tuple[type[BaseModel], JsonSchemaMode]] = [
        (ErrorResponse, "serialization"),
        (AgentEventFrame, "serialization"),
    ]
    for op in operations:
        if op.body is not None:
            wanted.append((op.body, "validation"))
        if isinstance(op.response, type) and issubclass(op.response, BaseModel):
            wanted.append((op.response, "serialization"))
    refs, defs = models_json_schema(list(dict.fromkeys(wanted)), ref_template=_REF)
    return {key: refs[key] for key in wanted}, dict(defs.get("$defs", {}))


def _operation(
    op: Operation, refs: dict[tuple[type[BaseModel], JsonSchemaMode], Any]
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "operationId": op.operation_id,
        "summary": op.summary,
        "tags": [op.tag],
        "parameters": _parameters(op),
        "responses": _responses(op, refs),
    }
    if op.public:
        spec["security"] = []
    if op.body is not None:
        spec["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": refs[(op.body, "validation")]}},
        }
    return spec


def _parameters(op: Operation) -> list[dict[str, Any]]:
    params: list[dict[str, Any]] = [
        {
            "name": p.name,
            "in": "path",
            "required": True,
            "description": p.description,
            "schema": {"type": "string", "pattern": p.pattern},
        }
        for p in op.path_params
    ]
    if op.query is not None:
        schema = op.query.model_json_schema()
        for name, prop in schema.get("properties", {}).items():
            param = {"name": name, "in": "query", "required": False, "schema": _non_null(prop)}
            if "description" in prop:
                param["description"] = prop["description"]
            params.append(param)
    for name, description in op.headers:
        params.append(
            {
                "name": name,
                "in": "header",
                "required": False,
                "description": description,
                "schema": {"type": "string", "pattern": "^[0-9]{1,19}$"},
            }
        )
    return params


def _non_null(prop: dict[str, Any]) -> dict[str, Any]:
    """A query value is text or absent, never null: ``X | None`` becomes ``X``."""
    options = prop.get("anyOf")
    schema = {k: v for k, v in prop.items() if k not in ("anyOf", "default", "title")}
    if options is not None:
        kept = [option for option in options if option.get("type") != "null"]
        if len(kept) == 1:
            schema.update(kept[0])
        else:
            schema["anyOf"] = kept
    return schema


def _responses(
    op: Operation, refs: dict[tuple[type[BaseModel], JsonSchemaMode], Any]
) -> dict[str, Any]:
    error = {"application/json": {"schema": refs[(ErrorResponse, "serialization")]}}
    responses: dict[str, Any] = {}
    if op.event_stream:
        responses[str(op.status)] = {
            "description": "text/event-stream: id = stream sequence, event = type, data = JSON",
            "content": {
                "text/event-stream": {
                    "schema": {"type": "string"},
                    "x-event": refs[(AgentEventFrame, "serialization")],
                }
            },
        }
    elif op.response is None:
        responses[str(op.status)] = {"description": _REASONS[op.status]}
    else:
        schema = refs[(op.response, "serialization")]
        responses[str(op.status)] = {
            "description": _REASONS[op.status],
            "content": {"application/json": {"schema": schema}},
        }
    codes = set(op.errors) | ({401, 403} if not op.public else set())
    if op.body is not None:
        codes |= {400, 413, 422}
    if op.path_params:
        codes |= {404, 422}
    if op.query is not None:
        codes.add(422)
    for code in sorted(codes):
        if str(code) not in responses:
            responses[str(code)] = {"description": _REASONS[code], "content": error}
    if not op.public:
        responses["5XX"] = {
            "description": "The engine or a worker failed, timed out or is unavailable",
            "content": error,
        }
    return responses
