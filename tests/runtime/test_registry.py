"""Finding workers by name: built-in table, entry points, close-match suggestions."""

from __future__ import annotations

import pytest

from tackroom.runtime import (
    UnknownWorker,
    WorkerLoadError,
    available_workers,
    load_worker,
    registry,
)
from tackroom.workers.engine.worker import WORKER as ENGINE_WORKER


def test_the_engine_worker_is_available_and_loads() -> None:
    assert "engine" in available_workers()
    assert load_worker("engine") is ENGINE_WORKER


def test_an_unknown_name_suggests_close_ones() -> None:
    with pytest.raises(UnknownWorker, match="did you mean engine") as caught:
        load_worker("engin")
    assert caught.value.suggestions == ["engine"]
    assert "engine" in caught.value.known


def test_an_unknown_name_without_close_ones_lists_the_known() -> None:
    with pytest.raises(UnknownWorker, match=r"known: .*engine") as caught:
        load_worker("zzzzzz")
    assert caught.value.suggestions == []


def test_a_built_in_name_wins_over_an_entry_point_of_the_same_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The order docs/runtime.md states: the built-in table first, then the entry points."""
    monkeypatch.setattr(
        registry,
        "_entry_point_targets",
        lambda: {"engine": "tackroom.no_such_module:WORKER", "extra": "tackroom.no_such:WORKER"},
    )
    assert load_worker("engine") is ENGINE_WORKER
    assert {"engine", "extra"} <= set(available_workers())
    with pytest.raises(WorkerLoadError, match=r"tackroom\.no_such:WORKER"):
        load_worker("extra")


def test_a_target_that_is_not_a_worker_spec_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(
        registry.BUILTIN_WORKERS, "bogus", "tackroom.workers.engine.worker:EngineWorkerConfig"
    )
    monkeypatch.setitem(registry.BUILTIN_WORKERS, "missing", "tackroom.no_such_module:WORKER")
    monkeypatch.setitem(
        registry.BUILTIN_WORKERS, "renamed", "tackroom.workers.engine.worker:WORKER"
    )
    with pytest.raises(WorkerLoadError, match="is not a WorkerSpec"):
        load_worker("bogus")
    with pytest.raises(WorkerLoadError, match="cannot load"):
        load_worker("missing")
    with pytest.raises(WorkerLoadError, match="registered as 'engine'"):
        load_worker("renamed")
