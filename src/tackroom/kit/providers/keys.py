"""Where a profile's API keys come from, and round-robin over several of them.

Order, first that gives a key wins:

1. ``keys_env: [A, B, ...]`` of the profile — several env vars, for round-robin;
2. ``auth::get_token {"provider": <credential>}`` when a credentials worker serves it
   (short timeout; a token may hold several keys separated by commas); its ``source``
   (``vault`` or ``env``) is reported as the keys' source;
3. ``api_key_env`` of the profile (comma-separated: several keys).

Without a key a profile that ``requires_key`` fails the call with an ``auth`` error naming what
to set; a local profile sends ``placeholder_key``. Keys are cached for ``ttl`` seconds and
dropped at once after an ``auth`` failure. A key is never logged or put in a message.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from pydantic import ValidationError

from tackroom.contracts.credentials import AUTH_GET_TOKEN, ProviderRequest
from tackroom.engine.errors import EngineError, FunctionNotFound
from tackroom.engine.protocol import Engine
from tackroom.kit.providers.config import ProfileSettings

__all__ = ["KeySource", "Keys", "split_keys"]

_log = logging.getLogger("tackroom.providers")

Source = Literal["keys_env", "vault", "env", "none"]


def split_keys(raw: str | None) -> tuple[str, ...]:
    """The keys in ``raw``: comma-separated, blanks dropped, duplicates removed."""
    if not raw:
        return ()
    return tuple(dict.fromkeys(part.strip() for part in raw.split(",") if part.strip()))


@dataclass(frozen=True, slots=True)
class Keys:
    """The keys a profile uses now and where they came from (``none``: no key set)."""

    values: tuple[str, ...]
    source: Source

    @property
    def present(self) -> bool:
        return bool(self.values)


class KeySource:
    """Resolves, caches and rotates the keys of one profile."""

    def __init__(
        self,
        engine: Engine,
        profile: ProfileSettings,
        *,
        name: str,
        clock: Callable[[], float],
        environ: Mapping[str, str] | None = None,
        ttl: float = 60.0,
        auth_timeout: float = 2.0,
    ) -> None:
        self._engine = engine
        self._profile = profile
        self._credential = profile.credential or name
        self._clock = clock
        self._environ = environ
        self._ttl = ttl
        self._auth_timeout = auth_timeout
        self._cached: Keys | None = None
        self._cached_at = 0.0
        self._next = 0
        self._known: set[str] = set()

    @property
    def credential(self) -> str:
        return self._credential

    @property
    def secrets(self) -> frozenset[str]:
        """Every key this source has handed out (to scrub them from messages)."""
        return frozenset(self._known)

    def _env(self, name: str) -> str | None:
        environ = os.environ if self._environ is None else self._environ
        return environ.get(name)

    def missing_hint(self) -> str:
        """What to set to give this profile a key."""
        names = list(self._profile.keys_env)
        if self._profile.api_key_env:
            names.append(self._profile.api_key_env)
        where = " or ".join(names) if names else "a key"
        return (
            f"no API key for {self._credential!r}: set {where}"
            f" (or store one with `tackroom auth set {self._credential}`)"
        )

    async def _from_vault(self) -> tuple[str | None, Source]:
        try:
            reply = await AUTH_GET_TOKEN.call(
                self._engine,
                ProviderRequest(provider=self._credential),
                timeout=self._auth_timeout,
            )
        except FunctionNotFound:
            return None, "none"
        except (EngineError, ValidationError) as exc:
            _log.warning("%s for %r failed, using env vars: %s", AUTH_GET_TOKEN.id,
                         self._credential, type(exc).__name__)  # fmt: skip
            return None, "none"
        if not reply.token:
            return None, "none"
        return reply.token, "env" if reply.source == "env" else "vault"

    async def resolve(self) -> Keys:
        """The current keys (cached for ``ttl`` seconds)."""
        now = self._clock()
        if self._cached is not None and now - self._cached_at < self._ttl:
            return self._cached
        keys = await self._lookup()
        self._known.update(keys.values)
        if self._cached is None or keys.values != self._cached.values:
            self._next = 0
        self._cached, self._cached_at = keys, now
        return keys

    async def _lookup(self) -> Keys:
        from_keys_env = tuple(
            dict.fromkeys(k for name in self._profile.keys_env for k in split_keys(self._env(name)))
        )
        if from_keys_env:
            return Keys(from_keys_env, "keys_env")
        token, source = await self._from_vault()
        vault = split_keys(token)
        if vault:
            return Keys(vault, source)
        if self._profile.api_key_env:
            env = split_keys(self._env(self._profile.api_key_env))
            if env:
                return Keys(env, "env")
        return Keys((), "none")

    def pick(self, keys: Keys) -> str | None:
        """The next key in round-robin order (``None`` when there is none)."""
        if not keys.values:
            return None
        key = keys.values[self._next % len(keys.values)]
        self._next = (self._next + 1) % len(keys.values)
        return key

    def invalidate(self) -> None:
        """Forget the cached keys (after an ``auth`` failure a new key may have been stored)."""
        self._cached = None
