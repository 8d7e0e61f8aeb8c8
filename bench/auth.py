"""What authenticating a request costs: the gateway's ``Authenticate`` layer in front of a route
that answers at once, against the same route with no authentication, per credential kind.

Imported by ``bench/gateway.py`` (its ``auth`` figure); each kind is timed interleaved with the
unauthenticated path, in this process, calling the ASGI app directly (no socket, no HTTP client:
the difference of the medians is the layer's own work). ``api_key`` reads the key's record from
the engine (embedded) every ``api_key_cache_seconds``; ``api_key_cold`` with no cache, a state
read per request. ``oidc`` verifies an RS256 JWT against a JWKS (cached verified tokens);
``oidc_cold`` verifies the signature on every request.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

from joserfc import jwt
from joserfc.jwk import RSAKey

from tackroom.contracts.identity import API_KEYS, mint_key
from tackroom.contracts.principal import Principal
from tackroom.engine import Engine, open_engine
from tackroom.workers.gateway.identity import (
    ApiKeys,
    Authenticate,
    Authenticator,
    OidcBearer,
    SharedToken,
)
from tackroom.workers.gateway.oidc import OidcAuthenticator, OidcSettings

__all__ = ["auth_overhead"]

TOKEN = "bench-token-0123456789abcdef"
ISSUER = "https://issuer.bench"
AUDIENCE = "https://tackroom.bench/api"


async def _ok(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 204, "headers": []})
    await send({"type": "http.response.body", "body": b""})


async def _call(app: Any, bearer: str | None) -> float:
    headers = [] if bearer is None else [(b"authorization", f"Bearer {bearer}".encode())]
    scope = {"type": "http", "method": "GET", "path": "/v1/ping", "headers": headers}
    statuses: list[int] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    start = time.perf_counter_ns()
    await app(scope, receive, send)
    elapsed = (time.perf_counter_ns() - start) / 1e3
    if statuses != [204]:
        raise RuntimeError(f"the bench's request was answered {statuses}")
    return elapsed


def _oidc(key: RSAKey, *, cache_seconds: float) -> tuple[Authenticator, str]:
    settings = OidcSettings(issuer=ISSUER, audience=AUDIENCE, jwks_url=f"{ISSUER}/jwks")
    jwks = {"keys": [key.as_dict(private=False)]}

    async def fetch(url: str, timeout: float) -> Any:
        return jwks

    verifier = OidcAuthenticator(settings, fetch_json=fetch, token_cache_seconds=cache_seconds)
    now = int(time.time())
    claims = {
        "iss": ISSUER,
        "aud": AUDIENCE,
        "sub": "alice",
        "tenant": "acme",
        "roles": ["member"],
        "iat": now,
        "exp": now + 3600,
    }
    token = jwt.encode({"alg": "RS256", "kid": key.kid}, claims, key)
    return OidcBearer(verifier), token


async def _kinds(engine: Engine) -> dict[str, tuple[Authenticator, str]]:
    minted = mint_key(tenant="acme", user="alice", roles=("member",), now=time.time())
    await API_KEYS.set(engine, minted.record.key_id, minted.record)
    owner = Principal(id="owner", roles=("admin",), method="token")
    key = RSAKey.generate_key(2048, parameters={"kid": "bench"})
    return {
        "shared_token": (SharedToken(token=TOKEN, principal=owner), TOKEN),
        "api_key": (ApiKeys(engine, cache_seconds=5.0), minted.text),
        "api_key_cold": (ApiKeys(engine, cache_seconds=0.0), minted.text),
        "oidc": _oidc(key, cache_seconds=60.0),
        "oidc_cold": _oidc(key, cache_seconds=0.0),
    }


async def auth_overhead(home: Path, samples: int) -> dict[str, Any]:
    """Median µs per request without authentication and with each kind, and the added ms."""
    engine = open_engine(f"embedded:{home / 'engine.db'}")
    await engine.start()
    try:
        kinds = await _kinds(engine)
        apps = {
            name: (Authenticate(_ok, authenticators=[auth], public=frozenset()), bearer)
            for name, (auth, bearer) in kinds.items()
        }
        plain: list[float] = []
        timed: dict[str, list[float]] = {name: [] for name in apps}
        for app, bearer in apps.values():  # warm: keys fetched, first records read
            await _call(app, bearer)
        for _ in range(samples):
            plain.append(await _call(_ok, None))
            for name, (app, bearer) in apps.items():
                timed[name].append(await _call(app, bearer))
    finally:
        await engine.close()
    base = statistics.median(plain)
    figures: dict[str, Any] = {"samples": samples, "unauthenticated_us": round(base, 1)}
    for name, values in timed.items():
        median = statistics.median(values)
        figures[name] = {
            "median_us": round(median, 1),
            "added_ms": round((median - base) / 1000, 4),
        }
    return figures
