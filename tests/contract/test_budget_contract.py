"""The budget contract suite against the ``budget`` worker this package ships."""

from __future__ import annotations

from tackroom.testing.contracts import BudgetContract


class TestBudgetWorker(BudgetContract):
    worker_name = "budget"
