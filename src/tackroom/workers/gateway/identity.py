"""Who is calling: every ``/v1`` request's credential turned into a :class:`Principal`.

The gateway asks its authenticators in turn — a user's own (``auth.authenticator``), per-user API
keys, OIDC bearer tokens, the one-person shared token — and the first that recognises the
credential decides: it answers the principal, or refuses with one line saying why. A credential
none recognises is a 401. The principal is put on the request (:func:`principal_of`); no route
reads one from a body.

An authenticator is any object with ``async authenticate(request: Credential) -> Principal |
None`` (``None``: not mine, ask the next); raising :class:`CredentialRefused` refuses the request.
"""

from __future__ import annotations

import hmac
import importlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from tackroom.contracts.identity import API_KEYS, ApiKeyRecord, key_id_of, secret_matches
from tackroom.contracts.principal import Principal
from tackroom.engine.errors import EngineError
from tackroom.engine.protocol import Engine
from tackroom.workers.gateway.errors import ApiError, error_response
from tackroom.workers.gateway.identity_errors import CredentialRefused
from tackroom.workers.gateway.oidc import OidcAuthenticator, is_jwt

__all__ = [
    "ApiKeys",
    "Authenticate",
    "Authenticator",
    "Credential",
    "CredentialRefused",
    "OidcBearer",
    "SharedToken",
    "load_authenticator",
    "principal_of",
]

_STATE_KEY = "tackroom.principal"


@dataclass(frozen=True, slots=True)
class Credential:
    """What a request presents: its bearer credential (if any) and its headers (lower-case
    names), for an authenticator that reads another header."""

    bearer: str | None
    headers: Mapping[str, str]
    method: str
    path: str


class Authenticator(Protocol):
    async def authenticate(self, credential: Credential) -> Principal | None: ...


class SharedToken:
    """The one-person token: whoever holds it is the owner of the gateway (local use)."""

    def __init__(self, *, token: str, principal: Principal) -> None:
        self._expected = token.encode()
        self._principal = principal

    async def authenticate(self, credential: Credential) -> Principal | None:
        given = credential.bearer
        if given is None or not hmac.compare_digest(given.encode(), self._expected):
            return None
        return self._principal


class ApiKeys:
    """``tk_…`` keys, found by key id in the engine's ``api-keys`` scope. A record read is kept
    ``cache_seconds``: a revocation reaches every gateway within that time."""

    def __init__(
        self,
        engine: Engine,
        *,
        cache_seconds: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._engine = engine
        self._cache_seconds = cache_seconds
        self._clock = clock
        self._cache: dict[str, tuple[float, ApiKeyRecord | None]] = {}

    async def authenticate(self, credential: Credential) -> Principal | None:
        parts = None if credential.bearer is None else key_id_of(credential.bearer)
        if parts is None:
            return None
        key_id, secret = parts
        record = await self._record(key_id)
        if record is None or not secret_matches(record, secret):
            raise CredentialRefused("unknown API key: check it, or ask for a new one")
        now = self._clock()
        if record.revoked_at is not None:
            raise CredentialRefused(f"API key {key_id} was revoked: ask for a new one")
        if not record.usable_at(now):
            raise CredentialRefused(f"API key {key_id} has expired: ask for a new one")
        return record.principal()

    async def _record(self, key_id: str) -> ApiKeyRecord | None:
        now = self._clock()
        cached = self._cache.get(key_id)
        if cached is not None and cached[0] > now:
            return cached[1]
        record = await API_KEYS.get(self._engine, key_id)
        if len(self._cache) > 10_000:
            self._cache.clear()
        self._cache[key_id] = (now + self._cache_seconds, record)
        return record


class OidcBearer:
    """OIDC access tokens: any bearer shaped like a JWT is this authenticator's to verify."""

    def __init__(self, verifier: OidcAuthenticator) -> None:
        self._verifier = verifier

    async def authenticate(self, credential: Credential) -> Principal | None:
        if credential.bearer is None or not is_jwt(credential.bearer):
            return None
        return await self._verifier.authenticate(credential.bearer)


def load_authenticator(spec: str, **options: Any) -> Authenticator:
    """A user's authenticator from ``module:attribute``: a class or factory called with the
    gateway's keyword options (``engine``), or an object with ``authenticate`` itself."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"auth.authenticator {spec!r}: write it as module:attribute")
    try:
        target: Any = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"auth.authenticator {spec!r} cannot be loaded: {exc}") from None
    made = isinstance(target, type) or not hasattr(target, "authenticate")
    found = target(**options) if made else target
    if not callable(getattr(found, "authenticate", None)):
        raise ValueError(f"auth.authenticator {spec!r} has no authenticate method")
    return cast(Authenticator, found)


def principal_of(request: Request) -> Principal:
    """The principal the request's credential established (set by :class:`Authenticate`)."""
    principal = request.scope.get("state", {}).get(_STATE_KEY)
    if not isinstance(principal, Principal):
        raise ApiError(401, "unauthorized", "this route needs a credential")
    return principal


class Authenticate:
    """401 for any ``/v1`` request (but ``public`` paths) whose credential no authenticator
    accepts; else the principal goes on the request."""

    def __init__(
        self, app: ASGIApp, *, authenticators: Sequence[Authenticator], public: frozenset[str]
    ) -> None:
        self.app = app
        self._authenticators = tuple(authenticators)
        self._public = public

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self._guarded(scope["path"]):
            await self.app(scope, receive, send)
            return
        credential = _credential(scope)
        try:
            principal = await self._identify(credential)
        except CredentialRefused as exc:
            await _refuse(str(exc), scope, receive, send)
            return
        except EngineError as exc:  # the keys could not be read: say so, refuse nothing wrongly
            unavailable = ApiError(
                503, "unavailable", f"the engine is unavailable: {' '.join(exc.message.split())}"
            )
            await error_response(unavailable)(scope, receive, send)
            return
        if principal is None:
            await _refuse(
                "this route needs a credential: Authorization: Bearer <an API key, an OIDC"
                " access token, or the gateway's token>",
                scope,
                receive,
                send,
            )
            return
        scope.setdefault("state", {})[_STATE_KEY] = principal
        await self.app(scope, receive, send)

    async def _identify(self, credential: Credential) -> Principal | None:
        for authenticator in self._authenticators:
            principal = await authenticator.authenticate(credential)
            if principal is not None:
                return principal
        return None

    def _guarded(self, path: str) -> bool:
        return (path == "/v1" or path.startswith("/v1/")) and path not in self._public


def _credential(scope: Scope) -> Credential:
    headers: dict[str, str] = {}
    for name, value in scope["headers"]:
        headers[name.decode("latin-1").lower()] = value.decode("latin-1")
    bearer = None
    scheme, _, rest = headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and rest.strip():
        bearer = rest.strip()
    return Credential(bearer=bearer, headers=headers, method=scope["method"], path=scope["path"])


async def _refuse(message: str, scope: Scope, receive: Receive, send: Send) -> None:
    response = error_response(
        ApiError(401, "unauthorized", message), headers={"WWW-Authenticate": "Bearer"}
    )
    await response(scope, receive, send)
