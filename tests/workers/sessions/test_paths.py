"""The pure tree logic: walking paths across shared history, and nesting the tree."""

from __future__ import annotations

import pytest

from tackroom.contracts.messages import UserMessage
from tackroom.contracts.sessions import SessionEntry, TreeNode
from tackroom.workers.sessions.paths import (
    Address,
    BrokenHistory,
    address_of,
    build_tree,
    parent_address,
    walk,
)


def entry(session_id: str, entry_id: str, parent: Address | None, seq: int) -> SessionEntry:
    return SessionEntry(
        entry_id=entry_id,
        session_id=session_id,
        parent_id=None if parent is None else parent[1],
        parent_session_id=None if parent is None or parent[0] == session_id else parent[0],
        seq=seq,
        type="message",
        message=UserMessage.text(entry_id),
        timestamp=0.0,
    )


def chain(session_id: str, ids: list[str], parent: Address | None = None) -> list[SessionEntry]:
    out = []
    for seq, entry_id in enumerate(ids, start=1):
        out.append(entry(session_id, entry_id, parent, seq))
        parent = (session_id, entry_id)
    return out


def by_id(entries: list[SessionEntry]) -> dict[str, SessionEntry]:
    return {e.entry_id: e for e in entries}


def ids_of(node: TreeNode) -> list[str]:
    return [e.entry_id for e in node.entries]


def test_parent_address_defaults_to_the_same_session() -> None:
    root, child = chain("s", ["a", "b"])
    assert parent_address(root) is None
    assert parent_address(child) == ("s", "a")
    assert address_of(child) == ("s", "b")
    foreign = entry("f", "x", ("s", "b"), 1)
    assert foreign.parent_session_id == "s"
    assert parent_address(foreign) == ("s", "b")


def test_walk_asks_for_each_session_it_has_not_got() -> None:
    source = chain("s", ["a", "b", "c"])
    fork = chain("f", ["x", "y"], parent=("s", "b"))
    path: list[SessionEntry] = []
    seen: set[Address] = set()
    known = {"f": by_id(fork)}
    missing = walk(("f", "y"), known, path, seen)
    assert missing == ("s", "b")
    assert [e.entry_id for e in path] == ["y", "x"]
    known["s"] = by_id(source)
    assert walk(missing, known, path, seen) is None
    assert [e.entry_id for e in path] == ["y", "x", "b", "a"]


def test_walk_from_nothing_is_empty() -> None:
    path: list[SessionEntry] = []
    assert walk(None, {}, path, set()) is None
    assert path == []


def test_walk_refuses_a_missing_entry_and_a_loop() -> None:
    entries = chain("s", ["a", "b"])
    with pytest.raises(BrokenHistory, match="'zz' of session 's' is not stored"):
        walk(("s", "zz"), {"s": by_id(entries)}, [], set())
    looped = {"a": entry("s", "a", ("s", "b"), 1), "b": entry("s", "b", ("s", "a"), 2)}
    with pytest.raises(BrokenHistory, match="its own ancestor"):
        walk(("s", "b"), {"s": looped}, [], set())


def test_tree_folds_single_children_into_runs_and_branches_at_forks() -> None:
    entries = chain("s", ["a", "b", "c"])
    entries.append(entry("s", "d", ("s", "a"), 4))  # a second child of a
    entries.append(entry("s", "e", ("s", "d"), 5))
    [root] = build_tree(entries, session_id="s")
    assert ids_of(root) == ["a"]
    assert [ids_of(child) for child in root.children] == [["b", "c"], ["d", "e"]]
    assert all(child.children == [] for child in root.children)


def test_tree_puts_shared_history_before_own_branches_and_orders_by_seq() -> None:
    shared = chain("s", ["a", "b"])
    own = [
        entry("f", "late", ("s", "b"), 2),
        entry("f", "early", ("s", "b"), 1),
        entry("f", "side", ("s", "a"), 3),
    ]
    [root] = build_tree([*own, *shared], session_id="f")
    assert ids_of(root) == ["a"]
    inherited, side = root.children
    assert ids_of(inherited) == ["b"]
    assert ids_of(side) == ["side"]
    assert [ids_of(child) for child in inherited.children] == [["early"], ["late"]]


def test_tree_roots_are_entries_without_a_present_parent() -> None:
    entries = [entry("s", "r1", None, 1), entry("s", "r2", None, 2)]
    assert [ids_of(root) for root in build_tree(entries, session_id="s")] == [["r1"], ["r2"]]
    assert build_tree([], session_id="s") == []


def test_tree_of_a_long_chain_is_one_node_and_deep_branching_needs_no_recursion() -> None:
    [root] = build_tree(chain("s", [f"e{i}" for i in range(5000)]), session_id="s")
    assert len(root.entries) == 5000
    assert root.children == []
    # every entry has a dead-end sibling: 2000 levels of nesting, built iteratively
    entries = chain("s", [f"m{i}" for i in range(2000)])
    entries += [entry("s", f"x{i}", ("s", f"m{i}"), 3000 + i) for i in range(2000)]
    [node] = build_tree(entries, session_id="s")
    depth = 1
    while node.children:
        assert len(node.children) <= 2
        node = node.children[0]
        depth += 1
    assert depth == 2000
