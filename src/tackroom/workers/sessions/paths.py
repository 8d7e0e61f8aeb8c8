"""Pure tree logic: entry addresses, walking a path across shared history, building the tree.

An entry's **address** is ``(session_id, entry_id)``. A fork stores no copy of the history it
shares: its first entries point at their parent's address in another session, so a path is
walked by following addresses from the leaf, session after session, to the root.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping

from tackroom.contracts.sessions import SessionEntry, TreeNode

__all__ = ["Address", "BrokenHistory", "address_of", "build_tree", "parent_address", "walk"]

Address = tuple[str, str]
"""``(session_id, entry_id)``."""


class BrokenHistory(Exception):
    """A path reaches an address that is not stored, or loops."""

    def __init__(self, address: Address, reason: str) -> None:
        super().__init__(f"entry {address[1]!r} of session {address[0]!r} {reason}")
        self.address = address


def address_of(entry: SessionEntry) -> Address:
    return (entry.session_id, entry.entry_id)


def parent_address(entry: SessionEntry) -> Address | None:
    if entry.parent_id is None:
        return None
    return (entry.parent_session_id or entry.session_id, entry.parent_id)


def walk(
    start: Address | None,
    known: Mapping[str, Mapping[str, SessionEntry]],
    path: list[SessionEntry],
    seen: set[Address],
) -> Address | None:
    """Follow parents from ``start``, appending each entry to ``path`` (leaf first).

    ``known`` maps a session id to its entries by id. Returns the first address whose session is
    not in ``known`` (load it and call again from there), or ``None`` once the root is reached.
    ``seen`` carries the visited addresses across calls, to refuse a loop.
    """
    current = start
    while current is not None:
        entries = known.get(current[0])
        if entries is None:
            return current
        entry = entries.get(current[1])
        if entry is None:
            raise BrokenHistory(current, "is not stored")
        if current in seen:
            raise BrokenHistory(current, "is its own ancestor")
        seen.add(current)
        path.append(entry)
        current = parent_address(entry)
    return None


def build_tree(entries: Iterable[SessionEntry], *, session_id: str) -> list[TreeNode]:
    """Nest ``entries`` by parent address, as runs of single children (see :class:`TreeNode`).

    Siblings are ordered shared history first (entries of other sessions), then by ``seq``.
    An entry whose parent is not among ``entries`` is a root. Iterative: no recursion limit.
    """
    nodes = list(entries)
    present = {address_of(entry) for entry in nodes}
    children: defaultdict[Address, list[SessionEntry]] = defaultdict(list)
    roots: list[SessionEntry] = []
    for entry in nodes:
        parent = parent_address(entry)
        if parent is None or parent not in present:
            roots.append(entry)
        else:
            children[parent].append(entry)

    def order(entry: SessionEntry) -> tuple[bool, int]:
        return (entry.session_id == session_id, entry.seq)

    for siblings in children.values():
        siblings.sort(key=order)
    roots.sort(key=order)

    result: list[TreeNode] = []
    stack: list[tuple[SessionEntry, list[TreeNode]]] = [(root, result) for root in reversed(roots)]
    while stack:
        first, sink = stack.pop()
        run = [first]
        kids = children.get(address_of(first), [])
        while len(kids) == 1:
            run.append(kids[0])
            kids = children.get(address_of(kids[0]), [])
        node = TreeNode(entries=run)
        sink.append(node)
        stack.extend((kid, node.children) for kid in reversed(kids))
    return result
