"""OIDC bearer tokens: verified against a real OpenID provider (panva's oidc-provider), refused
with one line that never holds the token, through key rotation; and the key-fetch rules (one
fetch at a time, a cooldown for unknown kids, stale keys kept on failure) against a fake issuer."""

from __future__ import annotations

import asyncio
import base64
import json
import statistics
import time
from typing import Any

import pytest
from joserfc import jwt
from joserfc.jwk import ECKey, KeySet, OctKey, RSAKey
from joserfc.jws import JWSRegistry
from joserfc.registry import HeaderParameter
from pydantic import ValidationError

from tackroom.contracts.principal import Principal
from tackroom.workers.gateway.identity_errors import CredentialRefused
from tackroom.workers.gateway.oidc import OidcAuthenticator, OidcSettings, is_jwt

from .oidc_provider import API, OTHER_API, OidcProvider, oidc_provider, payload_of

__all__ = ["oidc_provider"]  # the fixture, imported to be found


def settings_for(provider: OidcProvider, **overrides: Any) -> OidcSettings:
    return OidcSettings(issuer=provider.issuer, audience=API, **overrides)


async def refusal(authenticator: OidcAuthenticator, token: str) -> str:
    """The refusal's message, checked to be one line without any part of the token."""
    with pytest.raises(CredentialRefused) as caught:
        await authenticator.authenticate(token)
    message = str(caught.value)
    assert "\n" not in message
    assert message
    for part in token.split("."):
        assert len(part) < 8 or part not in message
    return message


def b64(data: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")


# --- settings -------------------------------------------------------------------------------


def test_settings_refuse_unsigned_and_shared_secret_algorithms() -> None:
    base = {"issuer": "https://id.example", "audience": API}
    for algs, words in (
        (["none"], "unsigned"),
        (["RS256", "HS256"], "shared-secret"),
        (["hs512"], "shared-secret"),
        (["RS1"], "unknown signing algorithm"),
    ):
        with pytest.raises(ValidationError, match=words):
            OidcSettings(**base, algorithms=algs)
    with pytest.raises(ValidationError, match="must include exp"):
        OidcSettings(**base, required_claims=["iss", "aud"])
    with pytest.raises(ValidationError, match="https://"):
        OidcSettings(issuer="http://id.example", audience=API)
    with pytest.raises(ValidationError, match="https://"):
        OidcSettings(**base, jwks_url="ftp://id.example/jwks")
    with pytest.raises(ValidationError):
        OidcSettings(**base, default_tenant="Not A Tenant")
    settings = OidcSettings(**base)
    assert settings.algorithms == ["RS256", "ES256", "PS256", "EdDSA"]
    assert OidcSettings(issuer="http://127.0.0.1:9", audience=API).issuer == "http://127.0.0.1:9"


def test_is_jwt_tells_tokens_from_api_keys() -> None:
    assert is_jwt("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhIn0.c2ln")
    assert not is_jwt("tk_0123456789abcdef")
    assert not is_jwt("a.b")


# --- against the real provider ----------------------------------------------------------------


async def test_tokens_become_principals(oidc_provider: OidcProvider) -> None:
    authenticator = OidcAuthenticator(settings_for(oidc_provider))
    alice = await authenticator.authenticate(await oidc_provider.token("alice"))
    assert alice == Principal(
        id="alice", roles=("deployer", "reader"), tenant="acme", method="oidc"
    )
    bob = await authenticator.authenticate(await oidc_provider.token("bob"))
    assert (bob.id, bob.roles, bob.tenant) == ("bob", ("reader", "writer"), "globex")

    keycloak = OidcAuthenticator(settings_for(oidc_provider, roles_claim="realm_access.roles"))
    dave = await keycloak.authenticate(await oidc_provider.token("dave"))
    assert (dave.id, dave.roles, dave.tenant) == ("dave", ("admin",), "acme")

    fallback = OidcAuthenticator(settings_for(oidc_provider, default_tenant="shared"))
    carol = await fallback.authenticate(await oidc_provider.token("carol"))
    assert (carol.id, carol.tenant, carol.method) == ("carol", "shared", "oidc")


async def test_the_console_sign_in_ends_with_a_token_the_gateway_accepts(
    oidc_provider: OidcProvider,
) -> None:
    token = await oidc_provider.console_sign_in("alice")
    principal = await OidcAuthenticator(settings_for(oidc_provider)).authenticate(token)
    assert (principal.id, principal.tenant, principal.roles) == (
        "alice",
        "acme",
        ("deployer", "reader"),
    )


async def test_key_rotation(oidc_provider: OidcProvider) -> None:
    settings = settings_for(oidc_provider, refetch_cooldown_seconds=0)
    verifying = OidcAuthenticator(settings, token_cache_seconds=0)
    caching = OidcAuthenticator(settings)
    authenticators = (verifying, caching)
    old = await oidc_provider.token("alice")
    for authenticator in authenticators:
        assert (await authenticator.authenticate(old)).id == "alice"

    kids = await oidc_provider.rotate(keep=1)  # a new signing key; the old one stays published
    assert len(kids) == 2
    new = await oidc_provider.token("alice")
    assert new != old
    for authenticator in authenticators:
        assert (await authenticator.authenticate(new)).id == "alice"  # an unknown kid: refetched
        assert (await authenticator.authenticate(old)).id == "alice"

    await oidc_provider.rotate(keep=0)  # another key, and the previous ones dropped
    newest = await oidc_provider.token("alice")
    for authenticator in authenticators:
        assert (await authenticator.authenticate(newest)).id == "alice"
        for dropped in (old, new):
            message = await refusal(authenticator, dropped)
            assert message.startswith("bearer token is signed with a key the issuer does not")


async def test_an_expired_token_is_refused(oidc_provider: OidcProvider) -> None:
    authenticator = OidcAuthenticator(settings_for(oidc_provider, leeway_seconds=0))
    token = await oidc_provider.token("expiring")  # lives 1 s
    exp = payload_of(token)["exp"]
    await asyncio.sleep(max(0.0, exp - time.time()) + 0.05)
    message = await refusal(authenticator, token)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(exp))
    assert message == f"bearer token expired at {stamp}: sign in again"


async def test_wrong_audience_issuer_and_missing_tenant_are_refused(
    oidc_provider: OidcProvider,
) -> None:
    authenticator = OidcAuthenticator(settings_for(oidc_provider))
    other = await oidc_provider.token("alice", resource=OTHER_API)
    message = await refusal(authenticator, other)
    assert message.startswith(f"bearer token audience is not '{API}'")

    elsewhere = OidcAuthenticator(
        OidcSettings(issuer="https://id.example", audience=API, jwks_url=oidc_provider.jwks_url)
    )
    message = await refusal(elsewhere, await oidc_provider.token("alice"))
    assert message.startswith("bearer token issuer is not 'https://id.example'")

    message = await refusal(authenticator, await oidc_provider.token("carol"))
    assert message.startswith("bearer token has no 'tenant' claim and no default tenant")


async def test_unsigned_and_foreign_signed_tokens_are_refused(oidc_provider: OidcProvider) -> None:
    authenticator = OidcAuthenticator(settings_for(oidc_provider))
    genuine = await oidc_provider.token("alice")
    await authenticator.authenticate(genuine)
    header = json.loads(base64.urlsafe_b64decode(genuine.split(".")[0] + "=="))
    claims = payload_of(genuine)

    unsigned = f"{b64({'alg': 'none', 'typ': 'at+jwt'})}.{b64(claims)}."
    message = await refusal(authenticator, unsigned)
    assert message.startswith("bearer token is not signed with an allowed algorithm (none)")

    # the same claims and kid, signed by a key of our own
    forger = RSAKey.generate_key(2048, parameters={"kid": header["kid"]})
    forged = jwt.encode({"alg": "RS256", "typ": "at+jwt", "kid": header["kid"]}, claims, forger)
    message = await refusal(authenticator, forged)
    assert message.startswith("bearer token signature does not verify with the issuer's key")

    stranger = jwt.encode({"alg": "RS256", "kid": "not-published"}, claims, forger)
    message = await refusal(authenticator, stranger)
    assert message.startswith("bearer token is signed with a key the issuer does not publish")

    secret = OctKey.import_key(b"a-shared-secret-of-32-bytes-long")
    hs = jwt.encode({"alg": "HS256", "kid": header["kid"]}, claims, secret)
    message = await refusal(authenticator, hs)
    assert "not signed with an allowed algorithm (HS256)" in message

    tampered = genuine.split(".")
    tampered[1] = b64({**claims, "tenant": "globex"})
    message = await refusal(authenticator, ".".join(tampered))
    assert message.startswith("bearer token signature does not verify")

    for junk in ("not-a-jwt", "a.b.c", "x" * 20_000):
        await refusal(authenticator, junk)


async def test_a_warm_request_costs_well_under_a_third_of_a_millisecond(
    oidc_provider: OidcProvider,
) -> None:
    token = await oidc_provider.token("alice")
    warm = OidcAuthenticator(settings_for(oidc_provider))
    cold = OidcAuthenticator(settings_for(oidc_provider), token_cache_seconds=0)
    medians = {}
    for name, authenticator in (("warm", warm), ("cold", cold)):
        await authenticator.authenticate(token)  # the keys fetched, the token remembered
        samples = []
        for _ in range(1000):
            started = time.perf_counter()
            await authenticator.authenticate(token)
            samples.append(time.perf_counter() - started)
        medians[name] = statistics.median(samples)
    warm_us, cold_us = medians["warm"] * 1e6, medians["cold"] * 1e6
    print(f"authenticate median: warm {warm_us:.1f} µs, cold {cold_us:.1f} µs")
    assert medians["warm"] < 0.0001


# --- the key-fetch rules, against a fake issuer -------------------------------------------------

ISSUER = "https://id.example"
JWKS = f"{ISSUER}/jwks"


class FakeIssuer:
    def __init__(self) -> None:
        self.keys = [ECKey.generate_key("P-256", parameters={"kid": "k1"})]
        self.fetches = 0
        self.failing = False
        self.gate: asyncio.Event | None = None

    async def fetch(self, url: str, timeout: float) -> object:
        self.fetches += 1
        if self.gate is not None:
            await self.gate.wait()
        if self.failing:
            raise OSError(f"{url} is unreachable (connection refused)")
        if url.endswith("/.well-known/openid-configuration"):
            return {"issuer": ISSUER, "jwks_uri": JWKS}
        return KeySet(list(self.keys)).as_dict()

    def token(self, kid: str = "k1", **claims: Any) -> str:
        key = next(key for key in self.keys if key.kid == kid)
        now = int(time.time())
        body = {"iss": ISSUER, "aud": API, "sub": "alice", "tenant": "acme", "exp": now + 300}
        return jwt.encode({"alg": "ES256", "kid": kid}, {**body, **claims}, key)


def fake_authenticator(issuer: FakeIssuer, **overrides: Any) -> OidcAuthenticator:
    settings = OidcSettings(issuer=ISSUER, audience=API, **overrides)
    return OidcAuthenticator(settings, fetch_json=issuer.fetch)


async def test_concurrent_requests_share_one_fetch() -> None:
    issuer = FakeIssuer()
    authenticator = fake_authenticator(issuer, jwks_url=JWKS)
    issuer.gate = asyncio.Event()
    tokens = [issuer.token(sub=f"user{n}") for n in range(10)]
    waiting = asyncio.gather(*(authenticator.authenticate(token) for token in tokens))
    await asyncio.sleep(0.01)
    issuer.gate.set()
    principals = await waiting
    assert [p.id for p in principals] == [f"user{n}" for n in range(10)]
    assert issuer.fetches == 1


async def test_unknown_kids_refetch_at_most_once_per_cooldown() -> None:
    issuer = FakeIssuer()
    authenticator = fake_authenticator(issuer, refetch_cooldown_seconds=0.2)
    await authenticator.authenticate(issuer.token())
    assert issuer.fetches == 2  # discovery, then the JWKS

    def stranger(n: int) -> str:
        key = ECKey.generate_key("P-256", parameters={"kid": f"random{n}"})
        return jwt.encode({"alg": "ES256", "kid": f"random{n}"}, payload_of(issuer.token()), key)

    await asyncio.sleep(0.2)
    issuer.keys.insert(0, ECKey.generate_key("P-256", parameters={"kid": "k2"}))
    assert (await authenticator.authenticate(issuer.token("k2"))).id == "alice"
    assert issuer.fetches == 3  # the JWKS again; the discovered jwks_uri is remembered
    for n in range(5):
        await refusal(authenticator, stranger(n))
    assert issuer.fetches == 3  # within the cooldown: no fetch
    await asyncio.sleep(0.2)
    await refusal(authenticator, stranger(5))
    assert issuer.fetches == 4


async def test_a_failed_fetch_keeps_the_keys_already_had() -> None:
    issuer = FakeIssuer()
    authenticator = fake_authenticator(issuer, jwks_url=JWKS, jwks_cache_seconds=0.01)
    await authenticator.authenticate(issuer.token(sub="first"))
    issuer.failing = True
    await asyncio.sleep(0.02)
    assert (await authenticator.authenticate(issuer.token(sub="second"))).id == "second"
    assert issuer.fetches == 2

    down = fake_authenticator(issuer, jwks_url=JWKS)
    message = await refusal(down, issuer.token())
    assert message.startswith("the identity provider's signing keys cannot be fetched (")
    assert "connection refused" in message


async def test_discovery_must_name_the_configured_issuer() -> None:
    issuer = FakeIssuer()
    settings = OidcSettings(issuer=f"{ISSUER}/realms/x", audience=API)
    authenticator = OidcAuthenticator(settings, fetch_json=issuer.fetch)
    message = await refusal(authenticator, issuer.token())
    assert "names issuer 'https://id.example', not 'https://id.example/realms/x'" in message


async def test_unknown_header_parameters_are_ignored_but_unknown_crit_ones_refused() -> None:
    issuer = FakeIssuer()
    authenticator = fake_authenticator(issuer, jwks_url=JWKS)
    claims = payload_of(issuer.token())
    understood = {"x-must": HeaderParameter("a parameter only the signer knows", "str")}
    lax = JWSRegistry(header_registry=understood, strict_check_header=False)
    extra = jwt.encode(
        {"alg": "ES256", "kid": "k1", "x-trace": "1"}, claims, issuer.keys[0], registry=lax
    )
    assert (await authenticator.authenticate(extra)).id == "alice"
    critical = {"alg": "ES256", "kid": "k1", "x-must": "1", "crit": ["x-must"]}
    message = await refusal(
        authenticator, jwt.encode(critical, claims, issuer.keys[0], registry=lax)
    )
    assert message == "bearer token is not valid (unsupported_header)"
