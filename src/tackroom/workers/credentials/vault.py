"""The credentials vault: one JSON file, private to its owner, replaced atomically on each write.

```json
{"schema_version": 1,
 "providers": {"openai": {"token": "sk-...", "updated_at": 1767225600.0}}}
```

- The file is created ``0600`` (a ``mkstemp`` file, then ``os.replace`` over the old one, then an
  ``fsync`` of the directory), so a reader sees the old vault or the new one, never half of one.
- A directory the vault creates is ``0700``; an existing directory open to others is kept (the
  file itself is private) and logged as a warning, as is a vault file readable by others.
- Writers take an exclusive ``flock`` on ``<vault>.lock``, so a ``tackroom auth set`` and a
  running worker never lose each other's changes.
- Every message of :class:`VaultError` names the path and the reason; none quotes the file's
  content, which holds secrets.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

__all__ = ["SCHEMA_VERSION", "StoredToken", "Vault", "VaultError", "VaultFile"]

SCHEMA_VERSION = 1

_log = logging.getLogger("tackroom.credentials")


class VaultError(Exception):
    """The vault cannot be read or written; the message never contains a secret."""


class StoredToken(BaseModel):
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    token: str = Field(min_length=1, repr=False)
    updated_at: float


class VaultFile(BaseModel):
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    schema_version: Literal[1] = 1
    providers: dict[str, StoredToken] = Field(default_factory=dict)


class Vault:
    """The vault at ``path``; every method is blocking (run it in a thread from async code)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._warned: set[str] = set()

    # -- reading -------------------------------------------------------------------------------
    def read(self) -> dict[str, StoredToken]:
        """The stored tokens by provider (``{}`` when there is no vault file yet)."""
        return self._load().providers

    def _load(self) -> VaultFile:
        try:
            with open(self.path, "rb") as handle:
                mode = os.fstat(handle.fileno()).st_mode
                raw = handle.read()
        except FileNotFoundError:
            return VaultFile()
        except OSError as exc:
            raise VaultError(self._reason("cannot read", exc)) from None
        if mode & 0o077:
            self._warn_once(
                "file",
                "credentials vault %s is readable by others (mode %o); it becomes 0600 at the "
                "next write",
                self.path,
                stat.S_IMODE(mode),
            )
        try:
            data = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            line = getattr(exc, "lineno", None)
            where = f" (line {line})" if line else ""
            raise VaultError(f"credentials vault {self.path} is not valid JSON{where}") from None
        if isinstance(data, dict) and data.get("schema_version") not in (None, SCHEMA_VERSION):
            raise VaultError(
                f"credentials vault {self.path} has schema_version "
                f"{data.get('schema_version')!r}; this tackroom reads {SCHEMA_VERSION}"
            )
        try:
            return VaultFile.model_validate(data)
        except ValidationError:
            raise VaultError(
                f"credentials vault {self.path} is not in the expected format "
                f'({{"schema_version": 1, "providers": {{NAME: {{"token", "updated_at"}}}}}}); '
                "fix or remove it"
            ) from None

    # -- writing -------------------------------------------------------------------------------
    def set(self, provider: str, token: str) -> None:
        with self._locked():
            vault = self._load()
            providers = dict(vault.providers)
            providers[provider] = StoredToken(token=token, updated_at=time.time())
            self._write(VaultFile(providers=providers))

    def delete(self, provider: str) -> bool:
        """Remove ``provider``'s token; ``False`` if the vault had none."""
        with self._locked():
            vault = self._load()
            if provider not in vault.providers:
                return False
            providers = {k: v for k, v in vault.providers.items() if k != provider}
            self._write(VaultFile(providers=providers))
            return True

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self._ensure_directory()
        lock_path = self.path.with_name(self.path.name + ".lock")
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise VaultError(self._reason("cannot lock", exc)) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing the descriptor releases the lock

    def _ensure_directory(self) -> None:
        directory = self.path.parent
        try:
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            mode = directory.stat().st_mode
        except OSError as exc:
            raise VaultError(self._reason("cannot create the directory of", exc)) from None
        if mode & 0o077:
            self._warn_once(
                "dir",
                "the directory of credentials vault %s is open to others (mode %o); the vault "
                "file itself is 0600",
                self.path,
                stat.S_IMODE(mode),
            )

    def _write(self, vault: VaultFile) -> None:
        directory = self.path.parent
        text = json.dumps(vault.model_dump(mode="json"), indent=2, sort_keys=True) + "\n"
        try:
            fd, temp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=directory)
        except OSError as exc:
            raise VaultError(self._reason("cannot write", exc)) from None
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                os.fchmod(handle.fileno(), 0o600)
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temp, self.path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise VaultError(self._reason("cannot write", exc)) from None
        _fsync_directory(directory)

    # -- helpers -------------------------------------------------------------------------------
    def _reason(self, what: str, exc: OSError) -> str:
        return f"{what} credentials vault {self.path}: {exc.strerror or type(exc).__name__}"

    def _warn_once(self, kind: str, message: str, *args: object) -> None:
        if kind not in self._warned:
            self._warned.add(kind)
            _log.warning(message, *args)


def _fsync_directory(directory: Path) -> None:
    """Make the rename durable; some filesystems refuse to open a directory, which is fine."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
