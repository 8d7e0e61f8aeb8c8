"""Routes of what a session's contexts carry: pin and unpin entries, compact the history now."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from tackroom.contracts import sessions as tree
from tackroom.contracts.context import COMPACT, CompactResponse, ContextSettings
from tackroom.contracts.gateway import CompactBody, PinBody
from tackroom.kit.compacting import COMPACT_TIMEOUT, manual_request, session_model
from tackroom.workers.gateway.access import may_on_session
from tackroom.workers.gateway.errors import ApiError
from tackroom.workers.gateway.inputs import json_body, path_id
from tackroom.workers.gateway.operations import Operation
from tackroom.workers.gateway.service import gateway_of, reply

__all__ = ["OPERATIONS"]


async def pin_entry(request: Request) -> Response:
    gateway = gateway_of(request)
    _, session_id = await may_on_session(request, "pin")
    body = await json_body(request, PinBody, limit=gateway.config.max_body_bytes)
    pinned = await gateway.call(
        tree.PIN, tree.PinRequest(session_id=session_id, entry_id=body.entry_id, text=body.text)
    )
    return reply(pinned)


async def unpin_entry(request: Request) -> Response:
    gateway = gateway_of(request)
    _, session_id = await may_on_session(request, "pin")
    entry_id = path_id(request, "eid")
    unpinned = await gateway.call(
        tree.UNPIN, tree.UnpinRequest(session_id=session_id, entry_id=entry_id)
    )
    return reply(unpinned)


async def compact_session(request: Request) -> Response:
    """The summary is written by the body's model, else the session's own (its newest answer's),
    else the gateway's default; the target is that model's budget (see
    :mod:`tackroom.kit.compacting`)."""
    gateway = gateway_of(request)
    principal, session_id = await may_on_session(request, "compact")
    body = await json_body(request, CompactBody, limit=gateway.config.max_body_bytes)
    path = await gateway.call(tree.MESSAGES, tree.MessagesRequest(session_id=session_id))
    defaults = gateway.config.defaults
    provider, model = _model(body.model, path) or _model(defaults.model, None) or ("", "")
    if not provider or not model:
        raise ApiError(
            422,
            "invalid_request",
            f"body.model: session {session_id!r} has no answer to take a model from and this"
            " gateway has no default: name one (PROVIDER:MODEL)",
            details={"field": "body.model"},
        )
    settings = defaults.context or ContextSettings()
    if body.keep_last is not None:
        settings = settings.model_copy(update={"keep_last": body.keep_last})
    compact = await manual_request(
        gateway.engine,
        session_id=session_id,
        provider=provider,
        model=model,
        settings=settings,
        path=path,
        principal=principal,
    )
    done = await gateway.call(COMPACT, compact, timeout=COMPACT_TIMEOUT)
    return reply(done)


def _model(named: str | None, path: tree.MessagesResponse | None) -> tuple[str, str] | None:
    if named is not None:
        provider, _, model = named.partition(":")
        return provider, model
    return None if path is None else session_model(path)


OPERATIONS = (
    Operation(
        method="POST",
        path="/v1/sessions/{sid}/pins",
        endpoint=pin_entry,
        operation_id="pinEntry",
        summary="Pin an entry (or a rule given as text): every later context carries it whole",
        tag="sessions",
        body=PinBody,
        response=tree.PinResponse,
        errors=(409,),
    ),
    Operation(
        method="DELETE",
        path="/v1/sessions/{sid}/pins/{eid}",
        endpoint=unpin_entry,
        operation_id="unpinEntry",
        summary="Unpin an entry (unpinning one not pinned changes nothing)",
        tag="sessions",
        response=tree.PinResponse,
        errors=(409,),
    ),
    Operation(
        method="POST",
        path="/v1/sessions/{sid}/compact",
        endpoint=compact_session,
        operation_id="compactSession",
        summary="Summarise the session's oldest history now into a compaction entry naming what"
        " it replaces (pinned entries stay whole)",
        tag="sessions",
        body=CompactBody,
        response=CompactResponse,
        errors=(409,),
    ),
)
