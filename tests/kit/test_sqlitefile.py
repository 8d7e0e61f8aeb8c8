"""``use_wal``: connections that open one new file at once all get it in WAL mode."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from tackroom.kit.sqlitefile import use_wal

ROUNDS = 20
BARE_ROUNDS = 80
"""Here the bare pragma loses about one round in four: 80 rounds never all win."""
OPENERS = 4


def _open_together(path: Path, switch: object) -> list[str]:
    barrier = threading.Barrier(OPENERS)
    outcomes: list[str] = []

    def opener() -> None:
        db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA busy_timeout = 10000")
        barrier.wait()
        try:
            switch(db)  # type: ignore[operator]
            outcomes.append(db.execute("PRAGMA journal_mode").fetchone()[0])
        except sqlite3.OperationalError as exc:
            outcomes.append(str(exc))
        finally:
            db.close()

    threads = [threading.Thread(target=opener) for _ in range(OPENERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes


def test_openers_racing_for_a_new_file_all_get_wal(tmp_path: Path) -> None:
    for n in range(ROUNDS):
        assert _open_together(tmp_path / f"{n}.db", use_wal) == ["wal"] * OPENERS


def test_the_race_is_real_without_it(tmp_path: Path) -> None:
    """Else the test above proves nothing: the bare pragma loses the race now and then."""

    def bare(db: sqlite3.Connection) -> None:
        db.execute("PRAGMA journal_mode = WAL")

    outcomes = [o for n in range(BARE_ROUNDS) for o in _open_together(tmp_path / f"{n}.db", bare)]
    assert any("locked" in o for o in outcomes)


def test_other_errors_are_raised_at_once(tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / "closed.db")
    db.close()
    with pytest.raises(sqlite3.ProgrammingError):
        use_wal(db)
