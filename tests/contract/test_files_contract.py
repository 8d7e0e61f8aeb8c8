"""The files contract suite against the ``files`` worker this package ships."""

from __future__ import annotations

from tackroom.testing.contracts.files import FilesContract


class TestFilesWorker(FilesContract):
    worker_name = "files"
