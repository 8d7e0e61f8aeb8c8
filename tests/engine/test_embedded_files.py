"""The embedded engine's files: damaged, emptied, locked or read-only databases and unsafe
directories each end in one typed error (or one warning line), never a traceback or a silent
fresh start."""

from __future__ import annotations

import logging
import os
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from tackroom.engine import EngineCorrupt, EngineStorageError, UnsafeDirectory
from tackroom.engine.embedded import EmbeddedEngine
from tests.engine.files import Unwritable, damage_page, unwritable_paths

NOBODY = 65534


@pytest.fixture
def unwritable() -> Iterator[Unwritable]:
    with unwritable_paths() as make:
        yield make


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "home" / "engine.db"


async def _write(path: Path, value: object = "v") -> None:
    async with EmbeddedEngine(path=path) as engine:
        await engine.set_state("s", "k", value)


def _replace(path: Path, data: bytes) -> None:
    path.parent.mkdir(mode=0o700, exist_ok=True)
    path.write_bytes(data)


def _bytes(path: Path) -> bytes:
    return path.read_bytes()


def _aside(path: Path) -> list[Path]:
    return sorted(p for p in path.parent.iterdir() if ".corrupt-" in p.name)


def _one_line(record: logging.LogRecord) -> str:
    message = record.getMessage()
    assert record.exc_info is None
    assert "\n" not in message
    return message


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [_one_line(r) for r in caplog.records if r.levelno >= logging.WARNING]


async def test_a_damaged_database_that_held_data_is_kept_aside(
    path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    await _write(path)
    damaged = damage_page(path)

    async with EmbeddedEngine(path=path) as engine:
        assert await engine.get_state("s", "k") is None
        await engine.set_state("s", "k", "new")

    [aside] = _aside(path)
    assert aside.read_bytes() == damaged
    [warning] = _warnings(caplog)
    assert "damaged" in warning
    assert aside.name in warning
    assert "new one" in warning


async def test_an_emptied_database_that_held_data_is_kept_aside(
    path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    await _write(path)
    _replace(path, b"")

    async with EmbeddedEngine(path=path) as engine:
        assert await engine.get_state("s", "k") is None

    [aside] = _aside(path)
    assert aside.stat().st_size == 0
    [warning] = _warnings(caplog)
    assert "0 bytes" in warning
    assert aside.name in warning


async def test_an_empty_file_nobody_opened_is_simply_initialised(
    path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _replace(path, b"")

    await _write(path)

    async with EmbeddedEngine(path=path) as engine:
        entry = await engine.get_state("s", "k")
    assert entry is not None
    assert _aside(path) == []
    assert _warnings(caplog) == []


async def test_a_file_that_is_not_a_tackroom_database_is_refused_untouched(
    path: Path,
) -> None:
    notes = b"my notes, not a database\n" * 200
    _replace(path, notes)

    for _ in range(2):
        with pytest.raises(EngineCorrupt) as refused:
            await EmbeddedEngine(path=path).start()
        assert "\n" not in str(refused.value)
        assert "not a database" in str(refused.value)
    assert _bytes(path) == notes
    assert _aside(path) == []


async def test_a_damaged_database_is_refused_by_a_read_only_open(path: Path) -> None:
    await _write(path)
    damaged = damage_page(path)

    with pytest.raises(EngineCorrupt, match="damaged"):
        await EmbeddedEngine(path=path, read_only=True).start()
    assert _bytes(path) == damaged
    assert _aside(path) == []


async def test_a_database_another_program_holds_is_one_typed_error(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tackroom.engine.embedded import database

    monkeypatch.setattr(database, "BUSY_TIMEOUT", 0.1)
    await _write(path)
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        with pytest.raises(EngineStorageError, match="locked by another program"):
            await EmbeddedEngine(path=path).start()
    finally:
        other.close()
    await _write(path, "after")


async def test_a_read_only_database_file_is_read_but_not_written(
    path: Path, unwritable: Unwritable
) -> None:
    await _write(path)
    unwritable(path)

    with pytest.raises(EngineStorageError) as refused:
        await EmbeddedEngine(path=path).start()
    assert str(path) in str(refused.value)
    async with EmbeddedEngine(path=path, read_only=True) as engine:
        entry = await engine.get_state("s", "k")
        assert entry is not None
        assert entry.value == "v"
        with pytest.raises(EngineStorageError, match="read-only"):
            await engine.set_state("s", "k", "w")


async def test_a_read_only_directory_is_read(path: Path, unwritable: Unwritable) -> None:
    await _write(path)
    before = sorted(os.listdir(path.parent))
    unwritable(path.parent)

    with pytest.raises(EngineStorageError):
        await EmbeddedEngine(path=path).start()
    async with EmbeddedEngine(path=path, read_only=True) as engine:
        entry = await engine.get_state("s", "k")
    assert entry is not None
    assert entry.value == "v"
    assert sorted(os.listdir(path.parent)) == before


async def test_a_read_only_open_of_a_missing_database_creates_nothing(path: Path) -> None:
    async with EmbeddedEngine(path=path, read_only=True) as engine:
        assert await engine.get_state("s", "k") is None
        assert await engine.list_state("s") == []
    assert not path.parent.exists()


async def test_our_directory_open_to_other_users_is_made_private(
    path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path.parent.mkdir()
    path.parent.chmod(0o777)

    await _write(path)

    assert stat.S_IMODE(path.parent.stat().st_mode) & 0o022 == 0
    [warning] = _warnings(caplog)
    assert str(path.parent) in warning


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the directory to another user")
async def test_a_directory_of_another_user_open_to_all_is_refused(path: Path) -> None:
    path.parent.mkdir()
    os.chown(path.parent, NOBODY, NOBODY)
    path.parent.chmod(0o777)

    with pytest.raises(UnsafeDirectory, match="other users"):
        await EmbeddedEngine(path=path).start()
    assert os.listdir(path.parent) == []
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o777
