"""Find workers by name: the built-in table first, then the ``tackroom.workers`` entry points.

The built-in table lets a source checkout run its own workers without reinstalling the package,
and resolves without reading package metadata (a start-up cost of ~35 ms). Other packages add
workers under new names through the entry point group; to replace a layer, boot your worker
under its own name — it registers the same function ids.
"""

from __future__ import annotations

import difflib
import functools
import importlib
from typing import Any

from tackroom.extras import missing_extra
from tackroom.runtime.errors import UnknownWorker, WorkerLoadError
from tackroom.runtime.worker import WorkerSpec

__all__ = [
    "BUILTIN_WORKERS",
    "ENTRY_POINT_GROUP",
    "available_workers",
    "is_builtin",
    "load_worker",
]

ENTRY_POINT_GROUP = "tackroom.workers"

BUILTIN_WORKERS: dict[str, str] = {
    "engine": "tackroom.workers.engine.worker:WORKER",
    "sessions": "tackroom.workers.sessions.worker:WORKER",
    "orchestrator": "tackroom.workers.orchestrator.worker:WORKER",
    "scripted": "tackroom.testing.scripted.worker:WORKER",
    "files": "tackroom.workers.files.worker:WORKER",
    "utilities": "tackroom.workers.utilities.worker:WORKER",
    "openai": "tackroom.workers.openai.worker:WORKER",
    "anthropic": "tackroom.workers.anthropic.worker:WORKER",
    "policy": "tackroom.workers.policy.worker:WORKER",
    "policy-cedar": "tackroom.workers.policy_cedar.worker:WORKER",
    "catalog": "tackroom.workers.catalog.worker:WORKER",
    "credentials": "tackroom.workers.credentials.worker:WORKER",
    "directory": "tackroom.workers.directory.worker:WORKER",
    "approvals": "tackroom.workers.approvals.worker:WORKER",
    "hooks": "tackroom.workers.hooks.worker:WORKER",
    "budget": "tackroom.workers.budget.worker:WORKER",
    "quota": "tackroom.workers.quota.worker:WORKER",
    "gateway": "tackroom.workers.gateway.worker:WORKER",
    "redactor": "tackroom.workers.redactor.worker:WORKER",
    "http": "tackroom.workers.http.worker:WORKER",
    "http-functions": "tackroom.workers.http_functions.worker:WORKER",
    "mcp": "tackroom.workers.mcp.worker:WORKER",
    "sandbox": "tackroom.workers.sandbox.worker:WORKER",
    "shell": "tackroom.workers.shell.worker:WORKER",
    "traces": "tackroom.workers.traces.worker:WORKER",
    "memory": "tackroom.workers.memory.worker:WORKER",
    "compactor": "tackroom.workers.compactor.worker:WORKER",
    "quarantine": "tackroom.workers.quarantine.worker:WORKER",
    "memory-postgres": "tackroom.workers.memory_postgres.worker:WORKER",
    "tasks": "tackroom.workers.tasks.worker:WORKER",
    "audit": "tackroom.workers.audit.worker:WORKER",
    "agents": "tackroom.workers.agents.worker:WORKER",
}


@functools.cache
def _entry_point_targets() -> dict[str, str]:
    from importlib.metadata import entry_points

    return {point.name: point.value for point in entry_points(group=ENTRY_POINT_GROUP)}


def _targets() -> dict[str, str]:
    return {**_entry_point_targets(), **BUILTIN_WORKERS}


def is_builtin(name: str) -> bool:
    return name in BUILTIN_WORKERS


def available_workers() -> list[str]:
    """Every worker name that can be booted, sorted."""
    return sorted(_targets())


def load_worker(name: str) -> WorkerSpec[Any]:
    """Import the worker registered as ``name``; raise ``UnknownWorker`` with close names, and
    ``WorkerLoadError`` naming the extra to install when the worker needs one (``policy-cedar``:
    ``pip install 'tackroom[cedar]'``)."""
    target = BUILTIN_WORKERS.get(name) or _entry_point_targets().get(name)
    if target is None:  # perhaps installed since the entry points were first read
        _entry_point_targets.cache_clear()
        importlib.invalidate_caches()
        target = _entry_point_targets().get(name)
    if target is None:
        targets = _targets()
        known = sorted(targets)
        raise UnknownWorker(
            name, suggestions=difflib.get_close_matches(name, known, n=3), known=known
        )
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
        spec = functools.reduce(getattr, attr.split("."), module) if attr else module
    except ModuleNotFoundError as exc:
        problem = missing_extra(exc, needed_by=f"the {name!r} worker")
        if problem is not None:
            raise WorkerLoadError(str(problem)) from exc
        raise WorkerLoadError(f"worker {name!r}: cannot load {target}: {exc}") from exc
    except Exception as exc:
        raise WorkerLoadError(f"worker {name!r}: cannot load {target}: {exc}") from exc
    if not isinstance(spec, WorkerSpec):
        raise WorkerLoadError(f"worker {name!r}: {target} is not a WorkerSpec")
    if spec.name != name:
        raise WorkerLoadError(f"worker {name!r}: {target} is registered as {spec.name!r}")
    return spec
