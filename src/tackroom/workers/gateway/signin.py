"""Routes of signing in: how a client may sign in here (public), and who the caller is.

The console asks ``GET /v1/auth/config`` before it has a credential: it offers its "Sign in"
button (OIDC authorization code with PKCE, done in the browser) when the gateway names an OIDC
client, and a field to paste an API key always. Only public values are answered: the issuer, the
console's client id (a public client: it has no secret), the scopes and the audience.
"""

from __future__ import annotations

import asyncio

from starlette.requests import Request
from starlette.responses import Response

from tackroom.contracts.gateway import AuthConfig, OidcSignIn, SignInMethod, WhoAmI
from tackroom.contracts.policy import RESOURCE_ACTIONS, AuthorizeResponse
from tackroom.workers.gateway.access import authorize
from tackroom.workers.gateway.identity import principal_of
from tackroom.workers.gateway.operations import Operation
from tackroom.workers.gateway.service import gateway_of, reply
from tackroom.workers.gateway.settings import AuthSettings

__all__ = ["OPERATIONS", "auth_config"]


def auth_config(auth: AuthSettings) -> AuthConfig:
    """The credentials ``auth`` accepts, in the order the gateway asks its authenticators."""
    methods: list[SignInMethod] = []
    if auth.authenticator is not None:
        methods.append("hook")
    if auth.api_keys:
        methods.append("api_key")
    if auth.oidc is not None:
        methods.append("oidc")
    if auth.shared_token:
        methods.append("token")
    oidc = auth.oidc
    if oidc is None:
        return AuthConfig(methods=methods)
    public = OidcSignIn(
        issuer=oidc.issuer, client_id=oidc.client_id, scopes=oidc.scopes, audience=oidc.audience
    )
    return AuthConfig(methods=methods, oidc=public)


async def get_auth_config(request: Request) -> Response:
    config = auth_config(gateway_of(request).config.auth)
    return reply(config, headers={"Cache-Control": "no-store"})


async def get_me(request: Request) -> Response:
    """Any credential the gateway accepts may ask who it stands for: no action is needed. Its
    ``actions`` are those the policy grants on its tenant's sessions."""
    principal = principal_of(request)
    answers = await asyncio.gather(
        *(authorize(request, principal, action, "session", None) for action in RESOURCE_ACTIONS)
    )
    granted = [a for a, answer in zip(RESOURCE_ACTIONS, answers, strict=True) if _yes(answer)]
    return reply(
        WhoAmI(
            tenant=principal.tenant,
            user=principal.id,
            roles=list(principal.roles),
            method=principal.method,
            on_behalf_of=principal.on_behalf_of,
            actions=granted,
        ),
        headers={"Cache-Control": "no-store"},
    )


def _yes(answer: AuthorizeResponse) -> bool:
    return answer.decision == "allow"


OPERATIONS = (
    Operation(
        method="GET",
        path="/v1/auth/config",
        endpoint=get_auth_config,
        operation_id="getAuthConfig",
        summary="How to sign in here: the credentials accepted, the OIDC client (no token needed)",
        tag="auth",
        response=AuthConfig,
        public=True,
    ),
    Operation(
        method="GET",
        path="/v1/me",
        endpoint=get_me,
        operation_id="getMe",
        summary="The caller: tenant, user, roles, how it signed in, what it may do",
        tag="auth",
        response=WhoAmI,
    ),
)
