"""Resolving a server's ``env`` and ``headers`` at connection time.

A value is a literal, ``{env: VAR}`` (this process's environment) or ``{credential: NAME}``
(``auth::get_token`` of the ``credentials`` worker: the vault, then ``NAME_API_KEY``). Resolved
values are never logged nor put in an error; a failure names the variable or credential only.
"""

from __future__ import annotations

import os

from tackroom.contracts.bus import Caller
from tackroom.contracts.credentials import AUTH_GET_TOKEN, ProviderRequest
from tackroom.engine.errors import FunctionNotFound, InvocationError
from tackroom.workers.mcp.config import CredentialRef, EnvRef, SecretValue

__all__ = ["SecretUnavailable", "resolve_all"]


class SecretUnavailable(Exception):
    """A referenced secret cannot be had (the message names it, never a value)."""


async def _resolve(bus: Caller, value: SecretValue) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, EnvRef):
        found = os.environ.get(value.env)
        if found is None:
            raise SecretUnavailable(f"the environment variable {value.env} is not set")
        return value.prefix + found
    return value.prefix + await _credential(bus, value)


async def _credential(bus: Caller, ref: CredentialRef) -> str:
    try:
        reply = await AUTH_GET_TOKEN.call(bus, ProviderRequest(provider=ref.credential))
    except FunctionNotFound:
        raise SecretUnavailable(
            f"credential {ref.credential!r} needs the credentials worker (auth::get_token),"
            " which is not running"
        ) from None
    except InvocationError as exc:
        raise SecretUnavailable(
            f"credential {ref.credential!r}: [{exc.remote_code}] {exc.message}"
        ) from None
    if reply.token is None:
        raise SecretUnavailable(
            f"no token for credential {ref.credential!r}: tackroom auth set {ref.credential}"
        )
    return reply.token


async def resolve_all(bus: Caller, values: dict[str, SecretValue]) -> dict[str, str]:
    return {key: await _resolve(bus, value) for key, value in values.items()}
