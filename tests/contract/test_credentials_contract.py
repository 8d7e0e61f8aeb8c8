"""The credentials contract suite against the ``credentials`` worker this package ships."""

from __future__ import annotations

from tests.contract.credentials_suite import CredentialsContract


class TestCredentialsWorker(CredentialsContract):
    worker_name = "credentials"
