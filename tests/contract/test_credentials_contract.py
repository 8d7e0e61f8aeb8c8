"""The credentials contract suite against the ``credentials`` worker this package ships."""

from __future__ import annotations

from tackroom.testing.contracts import CredentialsContract


class TestCredentialsWorker(CredentialsContract):
    worker_name = "credentials"
