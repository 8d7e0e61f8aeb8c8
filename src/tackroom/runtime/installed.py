"""Workers installed into a project with ``tackroom worker add``: what ``tackroom.yaml`` records
of each (``installed_workers:``), and how the boot list takes them in.

Which wins: a built-in worker's name always means the built-in (an installed package cannot
take it); an installed worker takes a built-in's place only when its record says
``replaces: [that built-in]`` — then the built-in is not booted wherever the boot list names it.
Without ``replaces``, both run, and a function id both serve is shared between them (each call
goes to one of them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from tackroom.runtime.worker import WorkerSpec

__all__ = [
    "INSTALLED_SCHEMA_VERSION",
    "InstalledWorker",
    "boot_list",
    "boot_specs",
    "installed_spec",
]

INSTALLED_SCHEMA_VERSION = 1


class InstalledWorker(BaseModel):
    """One ``installed_workers:`` entry (keyed by the worker's name)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: int = INSTALLED_SCHEMA_VERSION
    source: Literal["pip", "npm"]
    spec: str = Field(min_length=1, description="what was installed: a requirement or npm spec")
    package: str = Field(min_length=1, description="the distribution or npm package name")
    version: str = ""
    contracts: dict[str, int] = Field(default_factory=dict)
    """``function_id -> schema_version`` the worker declares, checked when it was added."""
    replaces: list[str] = Field(default_factory=list)
    """Built-in workers it stands in for (never booted beside it)."""
    command: list[str] = Field(default_factory=list)
    """npm: how the host runs it (``node <entry>``, absolute)."""


def boot_list(names: Sequence[str], installed: Mapping[str, InstalledWorker]) -> list[str]:
    """``names`` with each replaced built-in swapped for the installed worker that replaces it
    (in its place, once), duplicates dropped."""
    replacement = {old: name for name, worker in installed.items() for old in worker.replaces}
    return list(dict.fromkeys(replacement.get(name, name) for name in names))


def installed_spec(
    name: str, worker: InstalledWorker, *, engine_url: str
) -> WorkerSpec[Any] | None:
    """The spec that runs an npm worker as a process; ``None`` for a pip one (its entry point
    is loaded by name like any other)."""
    if worker.source != "npm":
        return None
    from tackroom.runtime.process import process_worker

    return process_worker(name, worker.command, engine_url=engine_url, version=worker.version)


def boot_specs(
    names: Sequence[str], installed: Mapping[str, InstalledWorker], *, engine_url: str
) -> list[WorkerSpec[Any]]:
    """The specs a host boots for ``names``: replaced built-ins swapped (:func:`boot_list`), an
    npm worker as its process, anything else loaded by name."""
    from tackroom.runtime.registry import load_worker

    return [
        (
            installed_spec(name, installed[name], engine_url=engine_url)
            if name in installed
            else None
        )
        or load_worker(name)
        for name in boot_list(names, installed)
    ]
