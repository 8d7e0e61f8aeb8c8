"""The store on a real engine through wrapping backends: interleaved concurrency, a crash between
the commit and the entry write, the cost of each operation, and the list index across days."""

from __future__ import annotations

import asyncio
from typing import Literal

import pytest

from tackroom.contracts.messages import text_of
from tackroom.contracts.sessions import CONTENTION_ERROR, SessionEntry
from tackroom.engine import Engine, FunctionError
from tackroom.workers.sessions.inbox import Inbox
from tackroom.workers.sessions.records import (
    DAYS_SCOPE,
    ENTRIES_SCOPE,
    INDEX_SCOPE,
    SESSIONS_SCOPE,
)
from tackroom.workers.sessions.store import SessionStore
from tests.workers.sessions.conftest import FakeClock, user
from tests.workers.sessions.fakes import AtomicBackend, Crash, WrappedBackend


async def path_of(store: SessionStore, session_id: str, leaf_id: str | None = None) -> list[str]:
    reply = await store.messages(session_id, leaf_id=leaf_id)
    return [m.entry_id for m in reply.messages]


@pytest.fixture
def racing(engine: Engine, clock: FakeClock) -> tuple[SessionStore, WrappedBackend]:
    backend = WrappedBackend(engine, interleave=True)
    return SessionStore(backend, clock=clock, max_attempts=1000), backend


async def test_interleaved_appends_form_one_chain_with_every_entry(
    racing: tuple[SessionStore, WrappedBackend],
) -> None:
    store, backend = racing
    sid = (await store.create()).session_id
    await asyncio.gather(*(store.append(sid, [(f"e{i}", user(f"m{i}"))]) for i in range(50)))
    reads = sum(1 for op, scope, _ in backend.ops if op == "get" and scope == SESSIONS_SCOPE)
    assert reads > 100, "the appends did not race (no lost compare-and-set): this proves nothing"
    info = await store.get(sid)
    assert info.entry_count == 50
    path = await path_of(store, sid)
    assert sorted(path) == sorted(f"e{i}" for i in range(50))
    assert path[-1] == info.leaf_id
    tree = await store.tree(sid)
    assert len(tree.roots) == 1
    assert len(tree.roots[0].entries) == 50  # one run: no accidental branch
    assert [e.seq for e in tree.roots[0].entries] == list(range(1, 51))


async def test_interleaved_duplicates_store_an_entry_once(
    racing: tuple[SessionStore, WrappedBackend],
) -> None:
    store, _ = racing
    sid = (await store.create()).session_id
    await store.append(sid, [("first", user("0"))])
    results = await asyncio.gather(
        *(store.append(sid, [("same", user("x"))]) for _ in range(20)),
        *(store.append(sid, [(f"other{i}", user("y"))]) for i in range(10)),
    )
    created = [r.created for [r] in results[:20]]
    assert created.count(True) == 1
    assert {r.entry.seq for [r] in results[:20]} == {results[created.index(True)][0].entry.seq}
    assert (await store.get(sid)).entry_count == 12
    assert len(await path_of(store, sid)) == 12


async def test_interleaved_drains_and_pushes_lose_and_repeat_nothing(
    engine: Engine,
) -> None:
    backend = WrappedBackend(engine, interleave=True, seed=3)
    inbox = Inbox(backend, max_attempts=1000)
    drained: list[str] = []

    async def drainer() -> None:
        for _ in range(40):
            drained.extend(text_of(m.content) for m in await inbox.drain("s", "steering"))

    async def pusher(start: int) -> None:
        for i in range(start, start + 25):
            await inbox.push("s", "steering", user(str(i)))

    await asyncio.gather(drainer(), drainer(), *(pusher(k * 25) for k in range(4)))
    drained.extend(text_of(m.content) for m in await inbox.drain("s", "steering"))
    assert sorted(drained, key=int) == [str(i) for i in range(100)]
    assert await inbox.peek("s", "steering") == []


async def test_contention_gives_up_with_a_typed_error_and_writes_nothing(
    engine: Engine, clock: FakeClock
) -> None:
    backend = WrappedBackend(engine, interleave=True)
    store = SessionStore(backend, clock=clock, max_attempts=1)
    sid = (await store.create()).session_id
    outcomes = await asyncio.gather(
        *(store.append(sid, [(f"e{i}", user("m"))]) for i in range(10)), return_exceptions=True
    )
    failures = [o for o in outcomes if isinstance(o, FunctionError)]
    assert failures
    assert all(f.code == CONTENTION_ERROR for f in failures)
    stored = await engine.list_state(ENTRIES_SCOPE, prefix=f"{sid}/")
    assert len(stored) == (await store.get(sid)).entry_count == 10 - len(failures)


async def test_an_entry_committed_before_a_crash_is_kept_and_stored_by_the_next_append(
    engine: Engine, clock: FakeClock
) -> None:
    backend = WrappedBackend(
        engine, crash_when=lambda op, scope, key: scope == ENTRIES_SCOPE and key.endswith("/b")
    )
    store = SessionStore(backend, clock=clock)
    sid = (await store.create()).session_id
    await store.append(sid, [("a", user("a"))])
    with pytest.raises(Crash):
        await store.append(sid, [("b", user("b"))])  # metadata committed, entry not written
    assert await engine.get_state(ENTRIES_SCOPE, f"{sid}/b") is None
    assert await path_of(store, sid) == ["a", "b"]
    [redelivered] = await store.append(sid, [("b", user("b"))])
    assert not redelivered.created
    await store.append(sid, [("c", user("c"))])
    assert await engine.get_state(ENTRIES_SCOPE, f"{sid}/b") is not None
    assert await path_of(store, sid) == ["a", "b", "c"]
    assert (await store.get(sid)).entry_count == 3


async def test_where_writes_commit_together_a_crash_before_the_entry_keeps_nothing(
    engine: Engine, clock: FakeClock
) -> None:
    backend = AtomicBackend(
        engine, crash_when=lambda op, scope, key: scope == ENTRIES_SCOPE and key.endswith("/b")
    )
    store = SessionStore(backend, clock=clock)
    sid = (await store.create()).session_id
    await store.append(sid, [("a", user("a"))])
    meta = await engine.get_state(SESSIONS_SCOPE, sid)
    assert meta is not None
    assert meta.value["pending"] == []  # the entry is stored once, in its own key
    with pytest.raises(Crash):
        await store.append(sid, [("b", user("b"))])  # one unit: the metadata is not written
    assert await engine.get_state(SESSIONS_SCOPE, sid) == meta
    assert await path_of(store, sid) == ["a"]
    [appended] = await store.append(sid, [("b", user("b"))])
    assert appended.created
    assert await path_of(store, sid) == ["a", "b"]
    info = await store.get(sid)
    assert (info.entry_count, info.last_message_preview) == (2, "b")


async def test_a_fork_from_an_entry_not_yet_stored_stores_it_first(
    engine: Engine, clock: FakeClock
) -> None:
    backend = WrappedBackend(
        engine, crash_when=lambda op, scope, key: scope == ENTRIES_SCOPE and key.endswith("/b")
    )
    store = SessionStore(backend, clock=clock)
    sid = (await store.create()).session_id
    await store.append(sid, [("a", user("a"))])
    with pytest.raises(Crash):
        await store.append(sid, [("b", user("b"))])
    fork = await store.fork(sid, "b")
    clone = await store.clone(sid)
    assert await path_of(store, fork.session_id) == ["a", "b"]
    assert await path_of(store, clone.session_id) == ["a", "b"]


async def test_storage_per_append_does_not_grow_with_the_session(
    store: SessionStore, backend: WrappedBackend, clock: FakeClock
) -> None:
    sid = (await store.create()).session_id
    written: list[int] = []
    op_counts: list[int] = []
    for i in range(1, 201):
        backend.reset()
        clock.advance()
        # whole seconds: a real clock's float would vary in width and measure the clock
        message = user("the same text every turn").model_copy(update={"timestamp": clock.now})
        await store.append(sid, [(f"e{i:04d}", message)])
        written.append(sum(w.stored_bytes for w in backend.writes))
        op_counts.append(len(backend.ops))
    # entry 200 differs from entry 1 only in a few digits (seq, counters), nothing else
    assert abs(written[199] - written[0]) <= 16, (written[0], written[199])
    assert max(written) - min(written) <= 16
    assert [scope for _, scope, _ in backend.ops].count(ENTRIES_SCOPE) == 3
    assert max(op_counts) <= 5
    assert all(op != "list" for op, _, _ in backend.ops)


async def test_reading_the_path_lists_each_session_once(
    store: SessionStore, backend: WrappedBackend
) -> None:
    sid = (await store.create()).session_id
    for i in range(30):
        await store.append(sid, [(f"e{i}", user("m"))])
    backend.reset()
    assert len(await path_of(store, sid)) == 30
    assert backend.ops == [("get", SESSIONS_SCOPE, sid), ("list", ENTRIES_SCOPE, f"{sid}/")]
    fork = await store.fork(sid, "e20")
    second = await store.fork(fork.session_id, "e10")
    await store.append(second.session_id, [("x", user("x"))])
    backend.reset()
    assert len(await path_of(store, second.session_id)) == 12
    lists = [key for op, _, key in backend.ops if op == "list"]
    assert lists == [f"{second.session_id}/", f"{sid}/"]  # the middle fork owns nothing on it


async def test_fork_and_clone_write_no_entry(store: SessionStore, backend: WrappedBackend) -> None:
    sid = (await store.create()).session_id
    for i in range(200):
        await store.append(sid, [(f"e{i}", user("m"))])
    backend.reset()
    fork = await store.fork(sid, "e150")
    clone = await store.clone(sid)
    assert {w.scope for w in backend.writes} <= {SESSIONS_SCOPE, INDEX_SCOPE, DAYS_SCOPE}
    assert len(backend.writes) == 6  # per session: index key, day, metadata
    assert all(w.scope != ENTRIES_SCOPE for w in backend.writes)
    assert len(await path_of(store, fork.session_id)) == 151
    assert len(await path_of(store, clone.session_id)) == 200


async def test_paging_crosses_days_reads_no_entry_and_skips_unclaimed_keys(
    store: SessionStore, backend: WrappedBackend, clock: FakeClock, engine: Engine
) -> None:
    created = []
    for i in range(120):
        clock.advance(3 * 3600)  # 120 sessions over 15 days
        created.append((await store.create(session_id=f"s{i:03d}")).session_id)
        await store.append(created[-1], [(None, user(f"hello {i}"))])
    ghost = {"schema_version": 1, "session_id": "ghost"}  # a creation that died half-way
    await engine.set_state(INDEX_SCOPE, "20231201/01701388800000000-ghost", ghost)
    orders: list[tuple[Literal["asc", "desc"], list[str]]] = [
        ("asc", created),
        ("desc", created[::-1]),
    ]
    for order, expected in orders:
        backend.reset()
        seen: list[str] = []
        cursor: str | None = None
        pages = 0
        while True:
            metas, cursor = await store.index.page(limit=7, cursor=cursor, order=order)
            seen += [m.session_id for m in metas]
            pages += 1
            if cursor is None:
                break
        assert seen == expected
        assert pages == 18
        assert all(scope != ENTRIES_SCOPE for _, scope, _ in backend.ops)
        gets = [key for op, scope, key in backend.ops if op == "get" and scope == SESSIONS_SCOPE]
        assert len(gets) <= 121  # only sessions on a page (and the ghost once)


async def test_a_lost_ensure_race_leaves_one_listed_session(
    racing: tuple[SessionStore, WrappedBackend], clock: FakeClock
) -> None:
    store, _ = racing

    async def ensure() -> bool:
        clock.advance(0.001)
        return (await store.ensure("shared"))[1]

    results = await asyncio.gather(*(ensure() for _ in range(10)))
    assert results.count(True) == 1
    metas, cursor = await store.index.page(limit=50, cursor=None, order="asc")
    assert [m.session_id for m in metas] == ["shared"]
    assert cursor is None


async def test_a_second_create_in_the_same_microsecond_keeps_the_first_listed(
    store: SessionStore,
) -> None:
    await store.create(session_id="twin")
    with pytest.raises(FunctionError) as caught:
        await store.create(session_id="twin")  # the fake clock has not moved: same index key
    assert caught.value.code == "session_exists"
    metas, _ = await store.index.page(limit=10, cursor=None, order="desc")
    assert [m.session_id for m in metas] == ["twin"]


def test_entries_round_trip_through_json() -> None:
    entry = SessionEntry(
        entry_id="e", session_id="s", parent_id=None, seq=1, type="message",
        message=user("hi"), timestamp=1.0,
    )  # fmt: skip
    assert SessionEntry.model_validate(entry.model_dump(mode="json")) == entry


async def test_where_writes_commit_together_the_first_sessions_of_a_day_all_commit(
    engine: Engine, clock: FakeClock
) -> None:
    # Every creator sees the day unlisted: were its key a compare-and-set in the unit, all but
    # one would lose it at the commit, and their whole creation with it.
    backend = AtomicBackend(engine, interleave=True)
    store = SessionStore(backend, clock=clock)
    created = await asyncio.gather(*(store.create(session_id=f"s{i:02d}") for i in range(20)))
    assert len(created) == 20
    metas, _ = await store.index.page(limit=50, cursor=None, order="asc")
    assert sorted(m.session_id for m in metas) == [f"s{i:02d}" for i in range(20)]
    assert len(await engine.list_state(DAYS_SCOPE)) == 1


async def test_where_writes_commit_together_a_crash_before_the_metadata_lists_nothing(
    engine: Engine, clock: FakeClock
) -> None:
    backend = AtomicBackend(engine, crash_when=lambda op, scope, key: scope == SESSIONS_SCOPE)
    store = SessionStore(backend, clock=clock)
    with pytest.raises(Crash):
        await store.create(session_id="lost")
    assert await engine.list_state(INDEX_SCOPE) == []
    assert await engine.list_state(DAYS_SCOPE) == []
    info = await store.create(session_id="lost")
    assert info.session_id == "lost"


async def test_where_writes_commit_together_a_lost_ensure_race_leaves_no_index_key(
    engine: Engine, clock: FakeClock
) -> None:
    store = SessionStore(AtomicBackend(engine, interleave=True), clock=clock, max_attempts=1000)

    async def ensure() -> bool:
        clock.advance(0.001)
        return (await store.ensure("shared"))[1]

    results = await asyncio.gather(*(ensure() for _ in range(10)))
    assert results.count(True) == 1
    assert [e.value["session_id"] for e in await engine.list_state(INDEX_SCOPE)] == ["shared"]


async def test_an_append_starts_from_the_head_the_last_one_wrote(
    store: SessionStore, backend: WrappedBackend
) -> None:
    sid = (await store.create()).session_id
    await store.append(sid, [("a", user("a"))])
    backend.ops.clear()
    await store.append(sid, [("b", user("b"))])
    assert ("get", SESSIONS_SCOPE, sid) not in backend.ops
    assert await path_of(store, sid) == ["a", "b"]


async def test_a_head_another_writer_replaced_is_read_again(
    engine: Engine, clock: FakeClock
) -> None:
    here, elsewhere = SessionStore(engine, clock=clock), SessionStore(engine, clock=clock)
    sid = (await here.create()).session_id
    await here.append(sid, [("a", user("a"))])
    await elsewhere.append(sid, [("b", user("b"))])  # another process: ``here`` kept a's head
    await here.append(sid, [("c", user("c"))])
    assert await path_of(here, sid) == ["a", "b", "c"]
    assert (await here.get(sid)).entry_count == 3


async def test_a_head_whose_unit_never_committed_is_read_again(
    engine: Engine, clock: FakeClock
) -> None:
    store = SessionStore(engine, clock=clock)
    sid = (await store.create()).session_id
    await store.append(sid, [("a", user("a"))])

    async def failed_step() -> None:
        async with engine.transaction():
            await store.append(sid, [("b", user("b"))])  # kept: a head never stored
            raise RuntimeError("the step failed after its append")

    with pytest.raises(RuntimeError):
        await failed_step()
    await store.append(sid, [("c", user("c"))])
    assert await path_of(store, sid) == ["a", "c"]
    assert (await store.get(sid)).entry_count == 2
