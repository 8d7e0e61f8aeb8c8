"""The task graph contract suite against the ``tasks`` worker this package ships."""

from __future__ import annotations

from tackroom.testing.contracts.tasks import TasksContract


class TestTasksWorker(TasksContract):
    worker_name = "tasks"
