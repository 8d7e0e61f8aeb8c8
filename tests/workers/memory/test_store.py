"""How the SQLite store reads the items FTS5 ranked: by rowid, never by walking the scope."""

from __future__ import annotations

from pathlib import Path

from tackroom.contracts.memory import MemoryScope
from tackroom.workers.memory.store import _BY_ROWID, SqliteMemoryStore, _filter_sql

SCOPE = MemoryScope(kind="workspace", id="default")


def test_ranked_items_are_read_by_rowid_not_by_the_scope_index(tmp_path: Path) -> None:
    store = SqliteMemoryStore.open(tmp_path / "memory.db")
    try:
        for index in range(50):
            store.save(SCOPE, f"item-{index}", f"note {index}", "{}", float(index))
        for filters in ({}, {"topic": "ci"}):
            where, values = _filter_sql(filters)
            plan = store._db.execute(
                "explain query plan " + _BY_ROWID + where, ("[1, 2, 3]", str(SCOPE), *values)
            ).fetchall()
            steps = " | ".join(row["detail"] for row in plan)
            assert "INTEGER PRIMARY KEY (rowid=?)" in steps, steps
            assert "items_by_update" not in steps, steps
    finally:
        store.close()
