"""The directory contract suite against the ``directory`` worker this package ships."""

from __future__ import annotations

from tests.contract.directory_suite import DirectoryContract


class TestDirectoryWorker(DirectoryContract):
    worker_name = "directory"
