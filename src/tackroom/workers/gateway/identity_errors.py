"""The one error every gateway authenticator raises for a credential it does not accept."""

from __future__ import annotations

__all__ = ["CredentialRefused"]


class CredentialRefused(Exception):
    """A credential (bearer token, API key) is not accepted. ``str()`` is one readable line saying
    what is wrong and what to do; it never holds the credential nor any secret."""

    def __init__(self, reason: str) -> None:
        self.reason = " ".join(reason.split())
        super().__init__(self.reason)
