"""The ``credentials`` worker: ``auth::get_token/set_token/delete_token/list_providers/status``.

```yaml
worker_config:
  credentials:
    vault_path: ~/.config/tackroom/credentials.json   # default ($XDG_CONFIG_HOME honoured)
    env: {}                # provider → environment variable, over the defaults
    use_env: true          # false: the vault only
```

A token comes from the vault first, then from the provider's environment variable. The vault is
read on every call (a small file), so a token set by ``tackroom auth set`` in another process is
seen at once. Nothing here logs, raises or returns a token except ``auth::get_token``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

from pydantic import Field

from tackroom.contracts.audit import AuditFact
from tackroom.contracts.credentials import (
    AUTH_DELETE_TOKEN,
    AUTH_GET_TOKEN,
    AUTH_LIST_PROVIDERS,
    AUTH_SET_TOKEN,
    AUTH_STATUS,
    DEFAULT_ENV_VARS,
    INVALID_TOKEN_ERROR,
    VAULT_ERROR,
    DeleteTokenResponse,
    EmptyRequest,
    ListProvidersResponse,
    ProviderName,
    ProviderRequest,
    ProviderStatus,
    SetTokenRequest,
    SetTokenResponse,
    Source,
    StatusRequest,
    StatusResponse,
    TokenResponse,
    env_var_for,
    fingerprint,
)
from tackroom.engine.errors import FunctionError
from tackroom.kit.audit import record_fact
from tackroom.runtime.worker import WorkerConfig, WorkerContext, WorkerSpec
from tackroom.workers.credentials.vault import Vault, VaultError

__all__ = ["WORKER", "Credentials", "CredentialsConfig", "default_vault_path"]

_log = logging.getLogger("tackroom.credentials")


def default_vault_path() -> Path:
    """``$XDG_CONFIG_HOME/tackroom/credentials.json``, else ``~/.config/tackroom/…``."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "tackroom" / "credentials.json"


class CredentialsConfig(WorkerConfig):
    vault_path: Path = Field(default_factory=default_vault_path)
    env: dict[ProviderName, str] = Field(
        default_factory=dict, description="provider → environment variable, over the defaults"
    )
    use_env: bool = True


def _usable(token: str) -> bool:
    return bool(token) and all(ch.isprintable() and not ch.isspace() for ch in token)


class Credentials:
    """The handlers, over one vault and the process environment."""

    def __init__(
        self,
        vault: Vault,
        *,
        env_vars: Mapping[str, str],
        use_env: bool = True,
        audit: Callable[[AuditFact], Awaitable[None]] | None = None,
    ) -> None:
        self.vault = vault
        self.env_vars = dict(env_vars)
        self.use_env = use_env
        self._audit = audit

    async def _record(self, kind: str, provider: str, **fact: object) -> None:
        """An audit fact of a key's use or change: the key by fingerprint, never itself."""
        if self._audit is not None:
            await self._audit(
                AuditFact(
                    fact_id=f"credentials:{uuid.uuid4().hex}",
                    kind=kind,
                    actor="credentials",
                    at=time.time(),
                    fact={"provider": provider, **fact},
                )
            )

    async def _stored(self) -> dict[str, str]:
        try:
            stored = await asyncio.to_thread(self.vault.read)
        except VaultError as exc:
            raise FunctionError(VAULT_ERROR, str(exc)) from None
        return {provider: entry.token for provider, entry in stored.items()}

    def _from_env(self, provider: str) -> str | None:
        if not self.use_env:
            return None
        value = os.environ.get(env_var_for(provider, self.env_vars), "").strip()
        return value or None

    def _resolve(self, provider: str, stored: Mapping[str, str]) -> tuple[str | None, Source]:
        if provider in stored:
            return stored[provider], "vault"
        token = self._from_env(provider)
        return (token, "env") if token is not None else (None, "none")

    async def get_token(self, request: ProviderRequest) -> TokenResponse:
        token, source = self._resolve(request.provider, await self._stored())
        _log.debug("auth: token for %s from %s", request.provider, source)
        if token is not None:
            label = fingerprint(token)
            await self._record(
                "credential_used", request.provider, source=source, fingerprint=label
            )
        return TokenResponse(provider=request.provider, token=token, source=source)

    async def set_token(self, request: SetTokenRequest) -> SetTokenResponse:
        token = request.token.get_secret_value().strip()
        if not _usable(token):
            raise FunctionError(
                INVALID_TOKEN_ERROR,
                f"the token given for provider {request.provider!r} is empty or has whitespace "
                "or control characters inside; nothing was stored",
            )
        try:
            await asyncio.to_thread(self.vault.set, request.provider, token)
        except VaultError as exc:
            raise FunctionError(VAULT_ERROR, str(exc)) from None
        label = fingerprint(token)
        _log.info("auth: stored a token for %s (%s)", request.provider, label)
        await self._record("credential_changed", request.provider, change="set", fingerprint=label)
        return SetTokenResponse(provider=request.provider, stored=True, fingerprint=label)

    async def delete_token(self, request: ProviderRequest) -> DeleteTokenResponse:
        try:
            deleted = await asyncio.to_thread(self.vault.delete, request.provider)
        except VaultError as exc:
            raise FunctionError(VAULT_ERROR, str(exc)) from None
        if deleted:
            _log.info("auth: deleted the stored token of %s", request.provider)
            await self._record("credential_changed", request.provider, change="delete")
        source: Source = "env" if self._from_env(request.provider) is not None else "none"
        return DeleteTokenResponse(provider=request.provider, deleted=deleted, source=source)

    def _known(self) -> list[str]:
        return sorted({*DEFAULT_ENV_VARS, *self.env_vars})

    async def list_providers(self, request: EmptyRequest) -> ListProvidersResponse:
        stored = await self._stored()
        with_env = {p for p in self._known() if self._from_env(p) is not None}
        return ListProvidersResponse(providers=sorted({*stored, *with_env}), known=self._known())

    async def status(self, request: StatusRequest) -> StatusResponse:
        stored = await self._stored()
        names = [request.provider] if request.provider else sorted({*stored, *self._known()})
        report: dict[str, ProviderStatus] = {}
        for name in names:
            token, source = self._resolve(name, stored)
            report[name] = ProviderStatus(
                configured=token is not None,
                source=source,
                fingerprint=fingerprint(token) if token is not None else None,
                env_var=env_var_for(name, self.env_vars),
            )
        return StatusResponse(providers=report)


async def _start(ctx: WorkerContext[CredentialsConfig]) -> None:
    config = ctx.config
    service = Credentials(
        Vault(config.vault_path.expanduser()),
        env_vars={**DEFAULT_ENV_VARS, **config.env},
        use_env=config.use_env,
        audit=functools.partial(record_fact, ctx.engine),
    )
    await ctx.serve(AUTH_GET_TOKEN, service.get_token)
    await ctx.serve(AUTH_SET_TOKEN, service.set_token)
    await ctx.serve(AUTH_DELETE_TOKEN, service.delete_token)
    await ctx.serve(AUTH_LIST_PROVIDERS, service.list_providers)
    await ctx.serve(AUTH_STATUS, service.status)


WORKER = WorkerSpec(
    name="credentials",
    description="Provider API tokens: a private vault file with environment fallback (auth::*).",
    config_model=CredentialsConfig,
    start=_start,
)
