"""OIDC bearer tokens: a JWT access token verified against its issuer's published keys, and the
:class:`Principal` its claims name.

joserfc does the cryptography and the claim checks; this module chooses what to trust: only
asymmetric algorithms (never ``none`` nor a shared-secret ``HS*``), checked against the header
before any key is looked at. The issuer's JWKS is cached; an unknown ``kid`` refetches it at most
once per cooldown (random kids cannot hammer the issuer), a failed fetch keeps the keys had, and
concurrent requests share one fetch. A verified token is remembered by its SHA-256 for at most a
minute (never past ``exp``), and forgotten when its key stops being published.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import math
import re
import time
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from joserfc import errors as jose
from joserfc import jwt
from joserfc.jwk import JWKRegistry, KeySet
from joserfc.jws import JWSRegistry, extract_compact
from joserfc.jwt import JWTClaimsRegistry
from pydantic import Field, field_validator

from tackroom.contracts.principal import TENANT_PATTERN, Principal
from tackroom.runtime.worker import WorkerConfig
from tackroom.workers.gateway.auth import is_loopback
from tackroom.workers.gateway.identity_errors import CredentialRefused

__all__ = ["SIGNING_ALGORITHMS", "FetchJson", "OidcAuthenticator", "OidcSettings", "is_jwt"]

_log = logging.getLogger("tackroom.gateway")

SIGNING_ALGORITHMS = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "ES256K"}
    | {"EdDSA", "Ed25519", "Ed448"}
)
"""The JWS algorithms a setting may allow: signatures by the issuer's private key only."""

FetchJson = Callable[[str, float], Awaitable[object]]
"""``(url, timeout_seconds) -> parsed JSON``; raises on any failure (its ``str()`` is shown)."""

_MAX_TOKEN_CHARS = 16 * 1024
_MAX_DOCUMENT_BYTES = 1024 * 1024
_USER = re.compile(r"[^\s\x00-\x1f\x7f]{1,200}")
_TENANT = re.compile(TENANT_PATTERN)
_SHOWN = re.compile(r"[A-Za-z0-9._:+-]{1,32}")
_SEGMENT = re.compile(r"[A-Za-z0-9_-]+")
_DEFAULT_ALGS = ("RS256", "ES256", "PS256", "EdDSA")
_NOT_JWT = "bearer token is not a signed JWT: send the access token the identity provider issued"
_UNPUBLISHED = "bearer token is signed with a key the issuer does not publish: sign in again"
_FORGED = "bearer token signature does not verify with the issuer's key: altered, or not from {}"


class OidcSettings(WorkerConfig):
    """Which issuer's tokens the gateway accepts, for which audience, and how claims map."""

    issuer: str = Field(min_length=1, description="the exact `iss` of accepted tokens")
    audience: str = Field(min_length=1, description="the `aud` a token must name: this API")
    jwks_url: str | None = Field(default=None, description="none: discovery's jwks_uri")
    algorithms: list[str] = Field(default_factory=lambda: [*_DEFAULT_ALGS], min_length=1)
    leeway_seconds: int = Field(default=60, ge=0, le=600, description="allowed clock skew")
    required_claims: list[str] = Field(default_factory=lambda: ["exp", "iss", "aud", "sub"])
    tenant_claim: str = Field(default="tenant", min_length=1)
    default_tenant: str | None = Field(
        default=None, pattern=TENANT_PATTERN, description="none: a token without one is refused"
    )
    user_claim: str = Field(default="sub", min_length=1)
    roles_claim: str = Field(
        default="roles", min_length=1, description="a dotted path reaches into objects"
    )
    jwks_cache_seconds: float = Field(default=300.0, gt=0)
    refetch_cooldown_seconds: float = Field(
        default=30.0, ge=0, description="an unknown kid refetches the JWKS at most this often"
    )
    http_timeout_seconds: float = Field(default=5.0, gt=0, le=60)
    client_id: str | None = Field(default=None, description="the console's PKCE client")
    scopes: list[str] = Field(default_factory=lambda: ["openid"])

    @field_validator("algorithms")
    @classmethod
    def _asymmetric_only(cls, value: list[str]) -> list[str]:
        for alg in value:
            if alg.lower() == "none":
                raise ValueError("'none' means an unsigned token: a bearer token must be signed")
            if alg.upper().startswith("HS"):
                raise ValueError(f"{alg} is a shared-secret algorithm: use RS*, PS*, ES* or EdDSA")
            if alg not in SIGNING_ALGORITHMS:
                raise ValueError(f"unknown signing algorithm {alg!r}: use RS*, PS*, ES* or EdDSA")
        return list(dict.fromkeys(value))

    @field_validator("required_claims")
    @classmethod
    def _essentials(cls, value: list[str]) -> list[str]:
        missing = [claim for claim in ("exp", "iss", "aud") if claim not in value]
        if missing:
            raise ValueError(f"required_claims must include {', '.join(missing)}: always checked")
        return list(dict.fromkeys(value))

    @field_validator("issuer", "jwks_url")
    @classmethod
    def _fetchable(cls, value: str | None) -> str | None:
        return value if value is None else _checked_url(value)


def _checked_url(url: str) -> str:
    """Keys fetched over plain HTTP could be swapped on the way: HTTPS, or HTTP on loopback."""
    parts = urlsplit(url)
    loopback = parts.scheme == "http" and is_loopback(parts.hostname or "")
    if parts.hostname and (parts.scheme == "https" or loopback):
        return url
    raise ValueError(f"{url!r} must be an https:// URL (http:// only on a loopback host)")


def is_jwt(token: str) -> bool:
    """Whether ``token`` is shaped like a JWS (so an API key can be left to its authenticator)."""
    parts = token.split(".")
    return len(parts) == 3 and all(_SEGMENT.fullmatch(part) for part in parts[:2])


class OidcAuthenticator:
    """Turns a bearer JWT into a :class:`Principal` (``method="oidc"``) or refuses it.

    ``fetch_json`` replaces the HTTP GET (default: urllib in a thread); ``clock``, the wall time
    for ``exp``/``nbf``; ``token_cache_seconds`` (0: off) and ``token_cache_size`` bound the cache
    of verified tokens. It holds no connection: there is nothing to close.
    """

    def __init__(
        self,
        settings: OidcSettings,
        *,
        fetch_json: FetchJson | None = None,
        clock: Callable[[], float] = time.time,
        token_cache_seconds: float = 60.0,
        token_cache_size: int = 10_000,
    ) -> None:
        self.settings = settings
        self._fetch_json = fetch_json or _get_json
        self._clock = clock
        self._cache_seconds = token_cache_seconds
        self._cache_size = token_cache_size
        self._tokens: dict[bytes, tuple[Principal, float, str | None]] = {}
        options: dict[str, Any] = {claim: {"essential": True} for claim in settings.required_claims}
        options["iss"] = {"essential": True, "value": settings.issuer}
        options["aud"] = {"essential": True, "value": settings.audience}
        self._claims = JWTClaimsRegistry(
            now=lambda: int(self._clock()), leeway=settings.leeway_seconds, **options
        )
        # unknown header parameters are ignored, as RFC 7515 says (joserfc refuses them by default)
        self._registry = JWSRegistry(algorithms=settings.algorithms, strict_check_header=False)
        self._jwks_url = settings.jwks_url
        self._keys: KeySet | None = None
        self._kids: frozenset[str | None] = frozenset()
        self._fetched_at = -math.inf
        self._attempted_at = -math.inf
        self._attempts = 0
        self._last_error = "not fetched yet"
        self._fetching = asyncio.Lock()

    async def authenticate(self, token: str) -> Principal:
        if len(token) > _MAX_TOKEN_CHARS or not token.isascii():
            raise CredentialRefused(_NOT_JWT)
        digest = hashlib.sha256(token.encode("ascii")).digest()
        now = self._clock()
        hit = self._tokens.get(digest)
        if hit is not None:
            if now < hit[1]:
                return hit[0]
            del self._tokens[digest]
        principal, exp, kid = await self._verify(token)
        until = min(exp, now + self._cache_seconds)
        if until > now:
            if len(self._tokens) >= self._cache_size:
                del self._tokens[next(iter(self._tokens))]
            self._tokens[digest] = (principal, until, kid)
        return principal

    async def refresh_keys(self) -> None:
        """Fetch the issuer's keys now (at start, say), keeping the old ones if that fails."""
        await self._refresh()

    async def _verify(self, token: str) -> tuple[Principal, float, str | None]:
        try:
            header = extract_compact(token.encode("ascii")).headers()
        except (jose.JoseError, ValueError, TypeError):
            raise CredentialRefused(_NOT_JWT) from None
        alg = header.get("alg")
        if alg not in self.settings.algorithms:
            raise CredentialRefused(
                f"bearer token is not signed with an allowed algorithm ({_shown(alg)}): this"
                f" gateway accepts {', '.join(self.settings.algorithms)}"
            )
        kid = header.get("kid")
        if kid is not None and not isinstance(kid, str):
            raise CredentialRefused("bearer token's key id (kid) is not a string")
        keys = await self._keys_for(kid)
        try:
            claims: dict[str, Any] = jwt.decode(token, keys, registry=self._registry).claims
        except jose.BadSignatureError:
            raise CredentialRefused(_FORGED.format(self.settings.issuer)) from None
        except jose.JoseError as exc:
            raise CredentialRefused(f"bearer token is not valid ({exc.error})") from None
        except ValueError:
            raise CredentialRefused("bearer token is not valid (no key fits it)") from None
        self._check_claims(claims)
        return self._principal(claims), float(claims["exp"]), kid

    def _check_claims(self, claims: dict[str, Any]) -> None:
        settings = self.settings
        try:
            self._claims.validate(claims)
        except jose.ExpiredTokenError:
            expired = _when(claims["exp"])
            raise CredentialRefused(f"bearer token expired at {expired}: sign in again") from None
        except jose.MissingClaimError as exc:
            raise CredentialRefused(f"bearer token lacks the claim(s) {exc.claim}") from None
        except jose.InvalidClaimError as exc:
            raise CredentialRefused(_invalid_claim(exc.claim, claims, settings)) from None

    def _principal(self, claims: Mapping[str, Any]) -> Principal:
        settings = self.settings
        user = _lookup(claims, settings.user_claim)
        if not isinstance(user, str) or not _USER.fullmatch(user):
            raise CredentialRefused(f"bearer token's {settings.user_claim!r} is not a user id")
        name = settings.tenant_claim
        tenant = _lookup(claims, name)
        if tenant is None and settings.default_tenant is None:
            raise CredentialRefused(
                f"bearer token has no {name!r} claim and no default tenant is set"
            )
        tenant = settings.default_tenant if tenant is None else tenant
        if not isinstance(tenant, str) or not _TENANT.fullmatch(tenant):
            raise CredentialRefused(
                f"bearer token's {name!r} is not a tenant name ({TENANT_PATTERN})"
            )
        roles = _roles(_lookup(claims, settings.roles_claim), settings.roles_claim)
        return Principal(id=user, roles=roles, tenant=tenant, method="oidc")

    async def _keys_for(self, kid: str | None) -> KeySet:
        settings, now = self.settings, time.monotonic()
        stale = now - self._fetched_at >= settings.jwks_cache_seconds
        if self._keys is not None and not stale and (kid is None or kid in self._kids):
            return self._keys
        # an unknown kid waits out the cooldown; stale keys too, but only after a failed fetch
        wait = settings.refetch_cooldown_seconds
        if stale:
            wait = min(wait, settings.jwks_cache_seconds)
        if now - self._attempted_at >= wait:
            await self._refresh()
        keys = self._keys
        if keys is None:
            raise CredentialRefused(
                f"the identity provider's signing keys cannot be fetched ({self._last_error}):"
                " try again later"
            )
        if kid not in self._kids and not (kid is None and len(keys.keys) == 1):
            raise CredentialRefused(_UNPUBLISHED)
        return keys

    async def _refresh(self) -> None:
        """One fetch at a time; who waited for it uses its result rather than fetching again."""
        attempts = self._attempts
        async with self._fetching:
            if self._attempts != attempts:
                return
            try:
                keys = await self._fetch_keys()
            except Exception as exc:  # any failure keeps the keys already had
                self._last_error = " ".join(str(exc).split()) or type(exc).__name__
                _log.warning("OIDC: cannot fetch the issuer's keys: %s", self._last_error)
            else:
                self._install(keys)
            self._attempted_at = time.monotonic()
            self._attempts += 1

    def _install(self, keys: KeySet) -> None:
        kids = frozenset(key.kid for key in keys.keys)
        if kids != self._kids:  # forget tokens whose key is gone
            _log.info("OIDC: the issuer publishes keys %s", sorted(map(str, kids)))
            self._tokens = {digest: hit for digest, hit in self._tokens.items() if hit[2] in kids}
        self._keys, self._kids = keys, kids
        self._fetched_at = time.monotonic()

    async def _fetch_keys(self) -> KeySet:
        url = self._jwks_url or await self._discover()
        document = await self._fetch(url)
        if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
            raise ValueError(f"{url} is not a JWK set")
        keys = []
        for data in document["keys"]:  # signing keys; a shared secret (oct) has no place here
            if not isinstance(data, dict) or data.get("kty") == "oct" or data.get("use") == "enc":
                continue
            try:
                keys.append(JWKRegistry.import_key(data))
            except (jose.JoseError, ValueError, TypeError, KeyError):
                _log.warning("OIDC: %s publishes a key that cannot be read; skipped", url)
        if not keys:
            raise ValueError(f"{url} publishes no signing key")
        self._jwks_url = url
        return KeySet(keys)

    async def _discover(self) -> str:
        issuer = self.settings.issuer
        url = issuer.rstrip("/") + "/.well-known/openid-configuration"
        document = await self._fetch(url)
        if not isinstance(document, dict) or not isinstance(document.get("jwks_uri"), str):
            raise ValueError(f"{url} names no jwks_uri")
        if document.get("issuer") != issuer:
            raise ValueError(f"{url} names issuer {document.get('issuer')!r}, not {issuer!r}")
        return _checked_url(document["jwks_uri"])

    async def _fetch(self, url: str) -> object:
        timeout = self.settings.http_timeout_seconds
        async with asyncio.timeout(timeout + 1):
            return await self._fetch_json(url, timeout)


def _invalid_claim(claim: str, claims: Mapping[str, Any], settings: OidcSettings) -> str:
    if claim == "iss":
        return f"bearer token issuer is not {settings.issuer!r}: it is from another provider"
    if claim == "aud":
        return f"bearer token audience is not {settings.audience!r}: get a token for this API"
    if claim == "nbf":
        return f"bearer token is not valid before {_when(claims['nbf'])}: check the clocks"
    if claim == "iat":
        return "bearer token was issued in the future: check the clocks"
    return f"bearer token's {claim!r} claim is not valid"


def _lookup(claims: Mapping[str, Any], name: str) -> object:
    """A claim by its name, else by a dotted path into objects (``realm_access.roles``)."""
    if name in claims:
        return claims[name]
    value: object = claims
    for part in name.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def _roles(value: object, claim: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = value.split()
    if not isinstance(value, list) or not all(isinstance(role, str) and role for role in value):
        raise CredentialRefused(f"bearer token's {claim!r} is not a list of role names")
    roles = tuple(dict.fromkeys(value))
    if len(roles) > 64:
        raise CredentialRefused(f"bearer token's {claim!r} claim holds more than 64 roles")
    return roles


def _when(value: Any) -> str:
    try:
        return datetime.fromtimestamp(value, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, OSError, ValueError, TypeError):
        return "?"


def _shown(value: object) -> str:
    """An untrusted header value, shown only if short and plain."""
    return value if isinstance(value, str) and _SHOWN.fullmatch(value) else "?"


async def _get_json(url: str, timeout: float) -> object:
    return await asyncio.to_thread(_get_json_blocking, url, timeout)


def _get_json_blocking(url: str, timeout: float) -> object:
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            body: bytes = reply.read(_MAX_DOCUMENT_BYTES + 1)
    except urllib.error.HTTPError as exc:
        raise ValueError(f"{url} answered HTTP {exc.code}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ValueError(f"{url} is unreachable ({reason})") from None
    if len(body) > _MAX_DOCUMENT_BYTES:
        raise ValueError(f"{url} answered more than {_MAX_DOCUMENT_BYTES} bytes")
    try:
        return json.loads(body)
    except ValueError:
        raise ValueError(f"{url} did not answer JSON") from None
