"""What ``Harness.use_memory(...)`` turns into: the worker that serves long-term memory, the
tools the model is offered, and the recall settings a run's context gets."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tackroom.contracts.context import ContextSettings, RecallSettings
from tackroom.contracts.memory import MEMORY_SAVE, MEMORY_SEARCH
from tackroom.harness.errors import UsageError
from tackroom.harness.memory_adapter import adapter_worker, is_memory_adapter
from tackroom.runtime.worker import WorkerSpec

__all__ = ["MEMORY_TOOLS", "MemoryChoice", "memory_choice", "with_recall"]

MEMORY_TOOLS = (MEMORY_SAVE.id, MEMORY_SEARCH.id)
"""What the model is offered: seed 003's save and load."""


@dataclass(frozen=True, slots=True)
class MemoryChoice:
    spec: WorkerSpec[Any] | None
    """The adapter's worker; ``None``: boot the ``memory`` worker."""
    recall: RecallSettings | None


def memory_choice(memory: Any, *, recall: bool | RecallSettings) -> MemoryChoice:
    """The worker and recall for ``use_memory(memory, recall=...)``, or a ``UsageError``."""
    if memory is not None and not is_memory_adapter(memory):
        raise UsageError(
            f"use_memory takes a MemoryAdapter (an object with save and load), not a"
            f" {type(memory).__name__}; a session store goes to use_session_store"
        )
    if isinstance(recall, RecallSettings):
        settings: RecallSettings | None = recall
    elif recall is True:
        settings = RecallSettings()
    elif recall is False:
        settings = None
    else:
        raise UsageError("use_memory(recall=) is True, False or a RecallSettings")
    return MemoryChoice(None if memory is None else adapter_worker(memory), settings)


def with_recall(context: ContextSettings | None, recall: RecallSettings) -> ContextSettings:
    """``context`` recalling with ``recall``, unless it names its own recall already."""
    settings = context or ContextSettings()
    if settings.recall is not None:
        return settings
    return settings.model_copy(update={"recall": recall})
