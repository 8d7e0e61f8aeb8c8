"""The embedded engine's unit of work: several writes, one SQLite transaction.

Inside ``async with engine.transaction():`` a write is checked at once — compare-and-set against
what the unit sees, the update applied to the value it sees — and given its revision, but it is
*kept*, not written: reads in the unit see it, others do not. When the block ends the kept
writes go to the store in one SQLite transaction — perhaps shared with other writers ready at
the same time (:mod:`.commits`) — after checking that no other writer changed a key the unit
read-modified or compared-and-set meanwhile (else :class:`RevisionConflict`, and nothing of the
unit is written). Stream records get their sequence then, in commit order, so subscribers see
no gap and nothing out of order; subscribers and trigger deliveries are told after the commit.

The unit travels in a context variable: a handler the block triggers in this process writes in
it. A task started inside the block inherits it too, until the block ends; after that its writes
are plain writes again.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from contextvars import ContextVar

from tackroom.engine.embedded.commits import Notice, Pending
from tackroom.engine.errors import RevisionConflict
from tackroom.engine.protocol import StateEntry

__all__ = ["CURRENT_UNIT", "Unit"]

Key = tuple[str, str]
StoreWrite = Callable[[], object]
"""A kept write: run inside the unit's SQLite transaction."""


class Unit:
    def __init__(self, owner: object) -> None:
        self.owner = owner
        self.open = True
        self._seen: dict[Key, StateEntry | None] = {}
        """Each key's value as the unit sees it: read from the store once, then its own writes."""
        self._base: dict[Key, int] = {}
        """The store's revision of each key when the unit first read it."""
        self._verify: set[Key] = set()
        """Keys whose revision must still be the base at commit (compare-and-set, update)."""
        self._written: set[Key] = set()
        self._writes: list[StoreWrite] = []
        self._notices: list[Notice] = []
        self._appends: Counter[Key] = Counter()

    # -- what the unit sees ---------------------------------------------------------------------
    def get(self, key: Key, load: Callable[[], StateEntry | None]) -> StateEntry | None:
        if key not in self._seen:
            entry = load()
            self._seen[key] = entry
            self._base[key] = 0 if entry is None else entry.revision
        return self._seen[key]

    def revision(self, key: Key, load_revision: Callable[[], int]) -> int:
        """The key's revision as the unit sees it (0: absent), without reading its value: a
        compare-and-set or a delete needs no more. (A plain write reads nothing: a key the unit
        wrote blind before it compares it has no base to verify at commit.)"""
        if key in self._seen:
            entry = self._seen[key]
            return 0 if entry is None else entry.revision
        if key not in self._base:
            self._base[key] = load_revision()
        return self._base[key]

    def overlay(self, scope: str, prefix: str, stored: list[StateEntry]) -> list[StateEntry]:
        """``stored`` (a listing) with the unit's own writes in it."""
        entries = {entry.key: entry for entry in stored}
        for kept_scope, key in self._written:
            if kept_scope != scope or not key.startswith(prefix):
                continue
            entry = self._seen[(kept_scope, key)]
            if entry is None:
                entries.pop(key, None)
            else:
                entries[key] = entry
        return [entries[key] for key in sorted(entries)]

    def pending_appends(self, stream: str, group_id: str) -> int:
        return self._appends[(stream, group_id)]

    # -- keeping writes -------------------------------------------------------------------------
    def check(self, key: Key, actual: int, expected: int | None) -> None:
        """Compare-and-set against the revision the unit sees (``actual``, 0: absent); the
        commit checks the store again."""
        if expected is None:
            return
        if actual != expected:
            raise RevisionConflict(key[0], key[1], expected, actual)
        self._verify.add(key)

    def keep_state(
        self, key: Key, entry: StateEntry | None, write: StoreWrite, notice: Notice | None
    ) -> None:
        self._seen[key] = entry
        self._written.add(key)
        self._writes.append(write)
        if notice is not None:
            self._notices.append(notice)

    def read_modify_write(self, key: Key) -> None:
        """The kept write was computed from the value seen: it must still be the stored one."""
        self._verify.add(key)

    def keep_append(self, stream: str, group_id: str, write: StoreWrite, notice: Notice) -> None:
        self._appends[(stream, group_id)] += 1
        self._writes.append(write)
        self._notices.append(notice)

    def keep(self, write: StoreWrite, notice: Notice | None = None) -> None:
        self._writes.append(write)
        if notice is not None:
            self._notices.append(notice)

    # -- the end --------------------------------------------------------------------------------
    def pending(self, revision_of: Callable[[str, str], int]) -> Pending | None:
        """The kept writes, to commit (``None``: nothing to write).

        ``revision_of`` reads a key's stored revision inside the transaction: the check that no
        other writer changed what the unit verifies.
        """
        self.open = False
        if not self._writes:
            return None

        def check() -> None:
            for scope, key in sorted(self._verify):
                if (scope, key) not in self._base:
                    continue  # first written blind by the unit: checked against its own write
                actual = revision_of(scope, key)
                if actual != self._base[(scope, key)]:
                    raise RevisionConflict(scope, key, self._base[(scope, key)], actual)

        def write() -> None:
            for kept in self._writes:
                kept()

        return Pending(write, check if self._verify else None, self._notices)

    def discard(self) -> None:
        self.open = False


CURRENT_UNIT: ContextVar[Unit | None] = ContextVar("tackroom_embedded_unit", default=None)
