"""The catalog contract suite against the ``catalog`` worker this package ships."""

from __future__ import annotations

from tackroom.testing.contracts import CatalogContract


class TestCatalogWorker(CatalogContract):
    worker_name = "catalog"
