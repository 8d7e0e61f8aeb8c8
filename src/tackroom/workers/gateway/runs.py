"""Routes of a run: start one, abort it, read its state, steer it (the session's inbox)."""

from __future__ import annotations

import uuid
from typing import Any

from jsonschema.exceptions import SchemaError
from jsonschema.validators import validator_for
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response

from tackroom.contracts.context import ContextSettings
from tackroom.contracts.gateway import AbortBody, MessageBody, RunBody, RunResponse
from tackroom.contracts.messages import UserMessage
from tackroom.contracts.principal import Principal
from tackroom.contracts.quota import ADMIT as QUOTA_ADMIT
from tackroom.contracts.quota import QUOTA_EXCEEDED_ERROR, AdmitRequest, ReleaseRequest
from tackroom.contracts.quota import RELEASE as QUOTA_RELEASE
from tackroom.contracts.sessions import INBOX_PUSH, InboxPushRequest, InboxPushResponse
from tackroom.contracts.turn import (
    RUN_ABORT,
    RUN_START,
    TURN_GET_STATE,
    RunAbortRequest,
    RunAbortResponse,
    RunStartRequest,
    TurnStateRequest,
    TurnStateView,
    parse_model_chain,
)
from tackroom.workers.gateway.access import may, may_on_session, new_session
from tackroom.workers.gateway.errors import ApiError, invalid
from tackroom.workers.gateway.identity import principal_of
from tackroom.workers.gateway.inputs import json_body
from tackroom.workers.gateway.operations import Operation
from tackroom.workers.gateway.service import Gateway, gateway_of, reply

__all__ = ["IMPERSONATE", "OPERATIONS", "run_principal", "run_request"]

_INBOX_OF = {"steer": "steering", "follow_up": "followup"}
IMPERSONATE = "impersonate"


def _new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


async def start_run(request: Request) -> Response:
    gateway = gateway_of(request)
    principal = principal_of(request)
    body = await json_body(request, RunBody, limit=gateway.config.max_body_bytes)
    start = run_request(gateway, body, principal=run_principal(gateway, principal, body.principal))
    await may(request, "run", "session", start.session_id, principal=principal)
    await _admit(gateway, start)
    try:
        answer = await gateway.call(RUN_START, start)
    except Exception:
        await _release(gateway, start)  # the slot is not held by a run that did not start
        raise
    if not answer.started:
        await _release(gateway, start)
    if not answer.started and not answer.queued:
        raise ApiError(
            409,
            "session_busy",
            answer.reason or f"session {start.session_id} has a run in flight",
            details={"session_id": start.session_id},
        )
    return reply(
        RunResponse(
            session_id=answer.session_id,
            run_id=answer.run_id,
            started=answer.started,
            queued=answer.queued,
            resumed=answer.resumed,
            reason=answer.reason,
            events_url=f"/v1/sessions/{answer.session_id}/events",
        ),
        status=202,
    )


async def _admit(gateway: Gateway, start: RunStartRequest) -> None:
    """The quota worker's word on the run (no quota worker: no limits)."""
    assert start.principal is not None
    request = AdmitRequest(
        principal=start.principal, run_id=start.run_id, session_id=start.session_id
    )
    answer = await gateway.call_if_served(QUOTA_ADMIT, request)
    if answer is None or answer.admitted or answer.refusal is None:
        return
    refusal = answer.refusal
    raise ApiError(
        429,
        QUOTA_EXCEEDED_ERROR,
        refusal.message(),
        details=refusal.model_dump(mode="json"),
        headers={"Retry-After": refusal.retry_after_header()},
    )


async def _release(gateway: Gateway, start: RunStartRequest) -> None:
    assert start.principal is not None
    request = ReleaseRequest(principal=start.principal, run_id=start.run_id)
    await gateway.call_if_served(QUOTA_RELEASE, request)


def run_principal(gateway: Gateway, principal: Principal, named: Principal | None) -> Principal:
    """Who the run acts for: the caller, or the principal the body names — which only a caller
    holding ``impersonate`` may, within its own tenant, and recorded as acting on its behalf."""
    if named is None:
        fallback = gateway.config.defaults.principal
        if principal.method == "token" and fallback is not None:
            return fallback  # the owner's own config names who its runs act for
        return principal
    if not principal.holds(IMPERSONATE):
        raise ApiError(
            403,
            "forbidden",
            f"body.principal: {principal.id!r} may not start a run for another principal (that"
            f" needs the {IMPERSONATE!r} role); leave it out to act as yourself",
            details={"field": "body.principal"},
        )
    acting = {"tenant": principal.tenant, "method": principal.method, "on_behalf_of": principal.id}
    return named.model_copy(update=acting)


def run_request(gateway: Gateway, body: RunBody, *, principal: Principal) -> RunStartRequest:
    """``run::start``'s request: the body over its ``agent_config`` over the gateway's
    defaults, in the principal's tenant."""
    defaults = gateway.config.defaults
    config = _agent_fields(body, defaults.context)
    model = body.model or (None if "provider" in config else defaults.model)
    if model is None and "provider" not in config:
        raise ApiError(
            422,
            "invalid_request",
            "body.model: name a model (PROVIDER:MODEL); this gateway has no default",
            details={"field": "body.model"},
        )
    if model is not None:
        try:
            first, *fallbacks = parse_model_chain(model)
        except ValueError as exc:
            field = "body.model" if body.model else "defaults.model"
            raise ApiError(
                422, "invalid_request", f"{field}: {exc}", details={"field": field}
            ) from None
        config.update(provider=first.provider, model=first.model, fallbacks=fallbacks)
    if body.output_schema is not None:
        _check_schema(body.output_schema)
    tools = config.get("tools", defaults.tools) if body.tools is None else body.tools
    try:
        return RunStartRequest(
            session_id=new_session(principal, body.session_id or _new_id("s")),
            run_id=body.run_id or _new_id("run"),
            provider=config["provider"],
            model=config["model"],
            fallbacks=config["fallbacks"],
            task=body.task or config.get("task"),
            mode=body.mode or config.get("mode") or defaults.mode,
            messages=[UserMessage.text(body.prompt)],
            max_turns=body.max_turns or config.get("max_turns") or defaults.max_turns,
            system_prompt=config.get("system_prompt"),
            instructions=body.instructions or config.get("instructions"),
            output_schema=body.output_schema,
            tools=list(tools),
            if_busy=body.if_busy,
            principal=principal,
            context=config.get("context"),
        )
    except ValidationError as exc:
        raise invalid(exc, where="body") from None


def _agent_fields(body: RunBody, context: ContextSettings | None) -> dict[str, Any]:
    """What ``body.agent_config`` sets of the run request (``context``: the gateway's, which a
    window limit alone is merged into)."""
    config = body.agent_config
    if config is None:
        return {}
    return config.run_fields(context=context)


def _check_schema(schema: dict[str, Any]) -> None:
    try:
        validator_for(schema).check_schema(schema)
    except SchemaError as exc:
        where = "/".join(str(part) for part in exc.path) or "the top"
        raise ApiError(
            422,
            "invalid_request",
            f"body.output_schema is not a JSON schema: {exc.message} (at {where})",
            details={"field": "body.output_schema"},
        ) from None
    except (RecursionError, TypeError, ValueError, LookupError):  # e.g. "$schema": []
        raise ApiError(
            422,
            "invalid_request",
            "body.output_schema is not a JSON schema",
            details={"field": "body.output_schema"},
        ) from None


async def abort_run(request: Request) -> Response:
    gateway = gateway_of(request)
    _, session_id = await may_on_session(request, "run")
    body = await json_body(request, AbortBody, limit=gateway.config.max_body_bytes)
    answer = await gateway.call(
        RUN_ABORT, RunAbortRequest(session_id=session_id, reason=body.reason)
    )
    if not answer.aborted and answer.state is None:
        raise _no_run(session_id)
    return reply(answer)


async def run_state(request: Request) -> Response:
    gateway = gateway_of(request)
    _, session_id = await may_on_session(request, "read")
    view = await gateway.call(TURN_GET_STATE, TurnStateRequest(session_id=session_id))
    if view is None:
        raise _no_run(session_id)
    return reply(view)


def _no_run(session_id: str) -> ApiError:
    return ApiError(404, "not_found", f"session {session_id!r} has no run")


async def push_message(request: Request) -> Response:
    gateway = gateway_of(request)
    _, session_id = await may_on_session(request, "run")
    body = await json_body(request, MessageBody, limit=gateway.config.max_body_bytes)
    pushed = await gateway.call(
        INBOX_PUSH,
        InboxPushRequest(
            session_id=session_id, name=_INBOX_OF[body.kind], item=UserMessage.text(body.text)
        ),
    )
    return reply(pushed, status=202)


OPERATIONS = (
    Operation(
        method="POST",
        path="/v1/runs",
        endpoint=start_run,
        operation_id="startRun",
        summary="Start a run (run::start); follow it on events_url",
        tag="runs",
        body=RunBody,
        response=RunResponse,
        status=202,
        errors=(403, 409, 429),
    ),
    Operation(
        method="POST",
        path="/v1/sessions/{sid}/abort",
        endpoint=abort_run,
        operation_id="abortRun",
        summary="Abort the run in flight on a session (run::abort)",
        tag="runs",
        body=AbortBody,
        response=RunAbortResponse,
    ),
    Operation(
        method="GET",
        path="/v1/sessions/{sid}/state",
        endpoint=run_state,
        operation_id="getRunState",
        summary="The turn state of a session's current or last run (turn::get_state)",
        tag="runs",
        response=TurnStateView,
    ),
    Operation(
        method="POST",
        path="/v1/sessions/{sid}/messages",
        endpoint=push_message,
        operation_id="pushMessage",
        summary="A steering or follow-up message into a session's inbox (session-inbox::push)",
        tag="runs",
        body=MessageBody,
        response=InboxPushResponse,
        status=202,
    ),
)
