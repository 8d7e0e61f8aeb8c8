"""The directory contract suite against the ``directory`` worker this package ships."""

from __future__ import annotations

from tackroom.testing.contracts import DirectoryContract


class TestDirectoryWorker(DirectoryContract):
    worker_name = "directory"
