"""The ``gateway`` worker: the harness over HTTP (``/v1``) and SSE, and the web console.

```yaml
worker_config:
  gateway:
    host: 127.0.0.1        # a non-loopback address needs a token (there always is one, below)
    port: 8787             # 0: any free port
    token: null            # a fixed bearer token; else token_path (generated 0600 at first start)
    cors_origins: []       # CORS off unless listed
    defaults: {model: openai:gpt-5-mini, tools: ["fs::*"]}   # tackroom serve: from agent.*
```

It registers no function: it calls the bus through the contracts and reads ``agent::events``,
so any number of gateways can stand in front of one engine (NATS). Routes, errors and the SSE
stream: ``docs/gateway.md``.
"""

from __future__ import annotations

import logging

from tackroom.contracts.principal import Principal
from tackroom.engine.protocol import Engine
from tackroom.runtime.worker import WorkerContext, WorkerSpec
from tackroom.workers.gateway.app import build_app
from tackroom.workers.gateway.auth import TokenProblem, is_loopback, load_or_create_token
from tackroom.workers.gateway.identity import (
    ApiKeys,
    Authenticator,
    OidcBearer,
    SharedToken,
    load_authenticator,
)
from tackroom.workers.gateway.oidc import OidcAuthenticator
from tackroom.workers.gateway.server import HttpServer
from tackroom.workers.gateway.service import Gateway
from tackroom.workers.gateway.settings import GatewayConfig

__all__ = [
    "WORKER",
    "GatewayConfig",
    "authenticators",
    "console_url",
    "ports_to_try",
    "resolve_token",
]

_log = logging.getLogger("tackroom.gateway")

_DEFAULT_PORT_TRIES = 10


def resolve_token(config: GatewayConfig) -> tuple[str, bool]:
    """The token, and whether it was generated just now; refuses to go on without one."""
    if config.token is not None:
        return config.token.get_secret_value(), False
    if config.token_path is None:
        where = "" if is_loopback(config.host) else f" (refusing to listen on {config.host})"
        raise TokenProblem(
            f"the gateway has no token{where}: set worker_config.gateway.token, or token_path"
        )
    return load_or_create_token(config.token_path)


def ports_to_try(config: GatewayConfig) -> range:
    """The configured port; the default one, or the next free of the nine after it."""
    if "port" in config.model_fields_set:
        return range(config.port, config.port + 1)
    return range(config.port, config.port + _DEFAULT_PORT_TRIES)


def console_url(host: str, port: int) -> str:
    shown = "127.0.0.1" if host in ("0.0.0.0", "") else host
    if ":" in shown and not shown.startswith("["):
        shown = f"[{shown}]"
    return f"http://{shown}:{port}/"


def authenticators(engine: Engine, config: GatewayConfig) -> tuple[list[Authenticator], str]:
    """The gateway's authenticators, asked in this order, and the shared token ("" when off)."""
    auth = config.auth
    chain: list[Authenticator] = []
    if auth.authenticator is not None:
        try:
            chain.append(load_authenticator(auth.authenticator, engine=engine))
        except ValueError as exc:
            raise TokenProblem(str(exc)) from None
    if auth.api_keys:
        chain.append(ApiKeys(engine, cache_seconds=auth.api_key_cache_seconds))
    if auth.oidc is not None:
        chain.append(OidcBearer(OidcAuthenticator(auth.oidc)))
    token = ""
    if auth.shared_token:
        token, _ = resolve_token(config)
        owner = Principal(
            id=auth.shared_token_user,
            roles=tuple(auth.shared_token_roles),
            tenant=auth.shared_token_tenant,
            method="token",
        )
        chain.append(SharedToken(token=token, principal=owner))
    if not chain:
        raise TokenProblem(
            "the gateway accepts no credential: turn on worker_config.gateway.auth.api_keys,"
            " auth.oidc or auth.shared_token"
        )
    return chain, token


async def _start(ctx: WorkerContext[GatewayConfig]) -> None:
    config = ctx.config
    chain, token = authenticators(ctx.engine, config)
    gateway = Gateway(ctx.engine, config)
    server = HttpServer(
        build_app(gateway, authenticators=chain),
        host=config.host,
        ports=ports_to_try(config),
        shutdown_seconds=config.shutdown_seconds,
    )
    ctx.spawn(server.serve(before_stop=gateway.streams.close_all), name="gateway-http")
    url = console_url(config.host, server.port)
    _log.info("gateway listening on %s", url)
    ctx.announce(f"console: {url}#token={token}" if token else f"console: {url}")


WORKER = WorkerSpec(
    name="gateway",
    description="The harness over HTTP and SSE (/v1), and the web console.",
    config_model=GatewayConfig,
    start=_start,
)
