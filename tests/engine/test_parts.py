"""``Engine`` is composed of its parts, and code that needs a part of the bus names it instead of
writing its own slice of the protocol."""

from __future__ import annotations

import ast
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import tackroom
from tackroom.engine import open_engine
from tackroom.engine import protocol as p

PARTS = (
    p.Lifecycle,
    p.Transactions,
    p.Caller,
    p.Functions,
    p.Queues,
    p.StateBackend,
    p.Triggers,
    p.Appender,
    p.Streams,
    p.LiveFrames,
    p.Channels,
)

SOURCE = Path(tackroom.__file__).parent

# Protocols that share a method name with ``Engine`` without being a slice of it: what a
# harness offers a run (its own ``get_state``), and what the facade's remote bus serves (a few
# calls of an engine in another process, not a whole part).
NOT_SLICES = {
    ("harness/runs.py", "RunHost"),
    ("harness/launch.py", "LaunchHost"),
    ("harness/decisions.py", "Bus"),
    ("kit/live.py", "LiveBus"),
}


def _members(protocol: type) -> set[str]:
    return {name for name in vars(protocol) if not name.startswith("_")}


def test_the_engine_is_its_parts_and_nothing_more() -> None:
    assert _members(p.Engine) == set(), "Engine declares members of its own"
    parts = set().union(*(_members(part) for part in PARTS))
    assert parts == {name for name in dir(p.Engine) if not name.startswith("_")}
    assert all(part in p.Engine.__mro__ for part in PARTS)


def test_no_module_writes_its_own_slice_of_the_engine() -> None:
    # ``start`` and ``close`` are every service's words: the bus's own ones are the rest.
    engine = {name for name in dir(p.Engine) if not name.startswith("_")} - _members(p.Lifecycle)
    slices: list[str] = []
    for path in sorted(SOURCE.rglob("*.py")):
        where = path.relative_to(SOURCE).as_posix()
        if where == "engine/protocol.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ClassDef) or (where, node.name) in NOT_SLICES:
                continue
            if not any(ast.unparse(base).endswith("Protocol") for base in node.bases):
                continue
            methods = {
                item.name
                for item in node.body
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
            }
            if methods & engine:
                slices.append(f"{where}: {node.name} writes {sorted(methods & engine)}")
    assert slices == [], "use the parts of tackroom.engine.protocol: " + "; ".join(slices)


class _Units:
    def __init__(self, *, atomic: bool) -> None:
        self.atomic = atomic

    @property
    def atomic_transactions(self) -> bool:
        return self.atomic

    def transaction(self) -> contextlib.AbstractAsyncContextManager[None]:
        return contextlib.nullcontext()


def test_a_journal_is_kept_only_where_units_of_work_are_not_atomic() -> None:
    effects = ["append", "emit"]
    assert p.journal(_Units(atomic=True), effects) == []
    kept = p.journal(_Units(atomic=False), effects)
    assert kept == effects
    assert kept is not effects  # the record's own list, not the caller's


@pytest.fixture
async def embedded() -> AsyncIterator[p.Engine]:
    engine = open_engine("embedded::memory:")
    await engine.start()
    try:
        yield engine
    finally:
        await engine.close()


async def test_the_embedded_engine_keeps_no_journal(embedded: p.Engine) -> None:
    assert p.journal(embedded, [1, 2]) == []
