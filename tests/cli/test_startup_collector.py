"""The ``tackroom`` process starts without the garbage collector (``tackroom.cli._startup``):
held until the command is up, then the objects of start-up are frozen and collection resumes.
``main(argv)`` in a test's process leaves that process's collector alone."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from tackroom.cli import _startup
from tackroom.cli.main import main


@pytest.fixture
def collector() -> Iterator[None]:
    assert gc.isenabled()
    frozen = gc.get_freeze_count()
    yield
    if gc.get_freeze_count() > frozen:
        gc.unfreeze()
    gc.enable()


@pytest.mark.usefixtures("collector")
def test_held_until_started_then_start_up_objects_are_frozen() -> None:
    _startup.hold()
    assert not gc.isenabled()

    _startup.started()

    assert gc.isenabled()
    assert gc.get_freeze_count() > 0
    _startup.started()  # once only
    assert gc.isenabled()


@pytest.mark.usefixtures("collector")
def test_started_without_hold_changes_nothing() -> None:
    frozen = gc.get_freeze_count()
    _startup.started()
    assert gc.isenabled()
    assert gc.get_freeze_count() == frozen


@pytest.mark.usefixtures("collector")
def test_main_with_argv_leaves_the_collector_alone(capsys: pytest.CaptureFixture[str]) -> None:
    frozen = gc.get_freeze_count()
    with pytest.raises(SystemExit):
        main(["--version"])
    assert "tackroom" in capsys.readouterr().err  # argparse exits through stderr
    assert gc.isenabled()
    assert gc.get_freeze_count() == frozen
