"""A user's own authenticator, for the gateway's ``auth.authenticator`` test: the trusted
header a front proxy sets (``X-Team-User: tenant/user``) becomes the principal."""

from __future__ import annotations

from typing import Any

from tackroom.contracts.principal import Principal
from tackroom.workers.gateway.identity import Credential, CredentialRefused


class ProxyHeader:
    def __init__(self, **options: Any) -> None:
        self.options = options

    async def authenticate(self, credential: Credential) -> Principal | None:
        named = credential.headers.get("x-team-user")
        if named is None:
            return None
        tenant, _, user = named.partition("/")
        if not user:
            raise CredentialRefused("X-Team-User must be tenant/user")
        return Principal(id=user, tenant=tenant, roles=("member",), method="hook")
