"""The gateway's ASGI app: the ``/v1`` routes, the OpenAPI document, the console's static page,
and the layers around them (errors, CORS when configured, who is calling)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from tackroom._version import __version__
from tackroom.workers.gateway import (
    approvals,
    audit_flows,
    catalog,
    curate,
    holds,
    model_calls,
    runs,
    runs_list,
    sessions,
    signin,
    traces,
)
from tackroom.workers.gateway.errors import ApiError, CatchAll, api_error, http_exception
from tackroom.workers.gateway.identity import Authenticate, Authenticator
from tackroom.workers.gateway.openapi import document
from tackroom.workers.gateway.operations import Operation
from tackroom.workers.gateway.service import Gateway

__all__ = ["CONSOLE_DIR", "OPERATIONS", "build_app", "openapi_document"]

CONSOLE_DIR = Path(__file__).with_name("console")
"""The web console's static files (``index.html`` and its assets)."""

OPENAPI_PATH = "/v1/openapi.json"

OPERATIONS: tuple[Operation, ...] = (
    *runs.OPERATIONS,
    *runs_list.OPERATIONS,
    *holds.OPERATIONS,
    *audit_flows.OPERATIONS,
    *sessions.OPERATIONS,
    *model_calls.OPERATIONS,
    *curate.OPERATIONS,
    *approvals.OPERATIONS,
    *catalog.OPERATIONS,
    *traces.OPERATIONS,
    *signin.OPERATIONS,
)

_PLACEHOLDER = """<!doctype html><meta charset="utf-8"><title>tackroom</title>
<p>The tackroom gateway is running; its console is not installed here. The API is under
<code>/v1</code> (<code>GET /v1/openapi.json</code>, with the token).</p>"""


@functools.cache
def openapi_document() -> dict[str, Any]:
    """Built once (pydantic's schemas take tens of milliseconds)."""
    return document(OPERATIONS, version=__version__)


async def _openapi(request: Request) -> Response:
    return JSONResponse(openapi_document())


async def _console(request: Request) -> Response:
    index = CONSOLE_DIR / "index.html"
    if index.is_file():
        return FileResponse(index, headers={"Cache-Control": "no-store"})
    return HTMLResponse(_PLACEHOLDER)


def build_app(gateway: Gateway, *, authenticators: Sequence[Authenticator]) -> Starlette:
    routes: list[BaseRoute] = [
        Route(op.path, op.endpoint, methods=[op.method]) for op in OPERATIONS
    ]
    routes.append(Route(OPENAPI_PATH, _openapi, methods=["GET"]))
    routes.append(Route("/", _console, methods=["GET"]))
    if CONSOLE_DIR.is_dir():
        routes.append(Mount("/console", StaticFiles(directory=CONSOLE_DIR), name="console"))
    public = frozenset(op.path for op in OPERATIONS if op.public)
    middleware = [Middleware(CatchAll), Middleware(traces.Untraced)]
    if gateway.config.cors_origins:
        middleware.append(
            Middleware(
                CORSMiddleware,
                allow_origins=list(gateway.config.cors_origins),
                allow_methods=["GET", "POST", "PATCH", "DELETE"],
                allow_headers=["Authorization", "Content-Type", "Last-Event-ID"],
                max_age=600,
            )
        )
    middleware.append(Middleware(Authenticate, authenticators=authenticators, public=public))
    app = Starlette(
        routes=routes,
        middleware=middleware,
        exception_handlers={ApiError: api_error, HTTPException: http_exception},
    )
    app.state.gateway = gateway
    return app
