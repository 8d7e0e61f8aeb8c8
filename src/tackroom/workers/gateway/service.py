"""What every route shares: the bus, the config, the live event streams, typed replies."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import Response

from tackroom.contracts.bus import Function, Req, Resp
from tackroom.engine.errors import EngineError
from tackroom.engine.protocol import Engine
from tackroom.workers.gateway.errors import ApiError, bus_error
from tackroom.workers.gateway.settings import GatewayConfig
from tackroom.workers.gateway.sse import EventStreams

__all__ = ["Gateway", "gateway_of", "reply"]


class Gateway:
    def __init__(self, engine: Engine, config: GatewayConfig) -> None:
        self.engine = engine
        self.config = config
        self.streams = EventStreams(
            engine,
            heartbeat=config.heartbeat_seconds,
            send_timeout=config.send_timeout_seconds,
            max_streams=config.max_streams,
        )

    async def call(
        self, function: Function[Req, Resp], request: Req, *, timeout: float | None = None
    ) -> Resp:
        """``function``'s typed reply; any failure becomes the :class:`ApiError` it means.
        ``timeout``: for a call that is known to take long (default ``call_timeout_seconds``)."""
        try:
            return await function.call(
                self.engine, request, timeout=timeout or self.config.call_timeout_seconds
            )
        except EngineError as exc:
            raise bus_error(exc) from None
        except ValidationError:
            raise ApiError(
                502,
                "upstream_error",
                f"{function.id} answered with something its contract does not allow",
                details={"function_id": function.id},
            ) from None

    async def call_if_served(self, function: Function[Req, Resp], request: Req) -> Resp | None:
        """:meth:`call`, or ``None`` when no worker serves ``function``."""
        try:
            return await self.call(function, request)
        except ApiError as exc:
            if exc.code == "unavailable" and (exc.details or {}).get("function_id"):
                return None
            raise


def gateway_of(request: Request) -> Gateway:
    gateway: Gateway = request.app.state.gateway
    return gateway


def reply(value: BaseModel | None, *, status: int = 200, headers: Any = None) -> Response:
    """``value`` as JSON (pydantic's own serializer: no NaN ever reaches the wire)."""
    if value is None:
        return Response(status_code=status, headers=headers)
    return Response(
        value.model_dump_json(), status_code=status, media_type="application/json", headers=headers
    )
