"""The gateway's shared bearer token: where it comes from and who may read it (the check itself is
one of the gateway's authenticators, :class:`~tackroom.workers.gateway.identity.SharedToken`).

The token is the config's ``token``, else the content of ``token_path``; the first gateway to
start without one generates it there (32 random bytes, URL-safe) as a fresh ``0600`` file, linked
into place so that two gateways starting at once end up with the same token. A token file others
can read is refused, not used. The token is never logged; ``tackroom serve`` prints it once.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import secrets
import stat
import tempfile
from pathlib import Path

__all__ = [
    "MIN_TOKEN_CHARS",
    "TokenProblem",
    "default_token_path",
    "is_loopback",
    "load_or_create_token",
]

MIN_TOKEN_CHARS = 16


class TokenProblem(Exception):
    """The token cannot be had (unreadable, open to others, too short): one line, no secret."""


def default_token_path() -> Path:
    """``.tackroom/gateway-token``, beside the embedded engine's database and the endpoint
    socket (relative to the working directory, as the other workers' files are)."""
    return Path(".tackroom") / "gateway-token"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def usable(token: str) -> bool:
    return len(token) >= MIN_TOKEN_CHARS and all(
        c.isascii() and c.isprintable() and not c.isspace() for c in token
    )


def load_or_create_token(path: Path) -> tuple[str, bool]:
    """The token kept at ``path``, and whether this call created it."""
    path = path.expanduser()
    existing = _read(path)
    if existing is not None:
        return existing, False
    _private_directory(path.parent)
    token = secrets.token_urlsafe(32)
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            os.fchmod(handle.fileno(), 0o600)
            handle.write(token + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(temp, path)  # fails if another gateway linked its token first: use that one
        except FileExistsError:
            winner = _read(path)
            if winner is None:
                raise TokenProblem(f"gateway token file {path} appeared empty") from None
            return winner, False
    except OSError as exc:
        raise TokenProblem(f"cannot write gateway token file {path}: {_why(exc)}") from None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temp)
    return token, True


def _read(path: Path) -> str | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise TokenProblem(f"cannot read gateway token file {path}: {_why(exc)}") from None
    with os.fdopen(fd, encoding="utf-8", errors="replace") as handle:
        mode = stat.S_IMODE(os.fstat(handle.fileno()).st_mode)
        if mode & 0o077:
            raise TokenProblem(
                f"gateway token file {path} is open to others (mode {mode:o}): chmod 600 it, or"
                " delete it to have a new token generated"
            )
        token = handle.read(4096).strip()
    if not usable(token):
        raise TokenProblem(
            f"gateway token file {path} holds no usable token (at least {MIN_TOKEN_CHARS}"
            " printable ASCII characters, no space): delete it to have one generated"
        )
    return token


def _private_directory(directory: Path) -> None:
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise TokenProblem(f"cannot create {directory}: {_why(exc)}") from None
    # an existing directory open to others is fine: the token file itself is 0600


def _why(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__
