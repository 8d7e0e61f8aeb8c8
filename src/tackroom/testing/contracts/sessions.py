"""The contract of a sessions worker (``session-tree::*``, ``session-inbox::*``), by function id.

Any worker that replaces ``sessions`` proves it fits by running this suite: subclass
:class:`SessionsContract` in a ``test_*.py`` module and name the worker::

    class TestMySessions(SessionsContract):
        worker_name = "my-sessions"

Every check goes through ``engine.trigger`` only: no test reads the worker's storage.
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

from tackroom.engine import Engine
from tackroom.testing.contracts.base import WorkerContract

__all__ = ["SessionsContract"]


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def text(message: dict[str, Any]) -> str:
    return "".join(block.get("text", "") for block in message["content"])


class SessionsContract(WorkerContract):
    worker_name: ClassVar[str] = "sessions"

    # -- helpers -------------------------------------------------------------------------------
    async def new_session(self, bus: Engine, **fields: Any) -> str:
        info = await self.call(bus, "session-tree::create", fields)
        session_id: str = info["session_id"]
        return session_id

    async def append(
        self, bus: Engine, session_id: str, entry_id: str | None, body: str, **extra: Any
    ) -> dict[str, Any]:
        payload = {"session_id": session_id, "message": user(body), **extra}
        if entry_id is not None:
            payload["entry_id"] = entry_id
        result: dict[str, Any] = await self.call(bus, "session-tree::append", payload)
        return result

    async def path(self, bus: Engine, session_id: str, **extra: Any) -> list[str]:
        reply = await self.call(bus, "session-tree::messages", {"session_id": session_id, **extra})
        return [item["entry_id"] for item in reply["messages"]]

    async def texts(self, bus: Engine, session_id: str) -> list[str]:
        reply = await self.call(bus, "session-tree::messages", {"session_id": session_id})
        return [text(item["message"]) for item in reply["messages"]]

    # -- sessions ------------------------------------------------------------------------------
    async def test_create_get_and_ensure(self, bus: Engine) -> None:
        info = await self.call(bus, "session-tree::create", {"display_name": "demo", "cwd": "/w"})
        assert info["display_name"] == "demo"
        assert info["cwd"] == "/w"
        assert info["entry_count"] == 0
        assert info["leaf_id"] is None
        sid = info["session_id"]
        assert await self.call(bus, "session-tree::get", {"session_id": sid}) == info
        again = await self.call(bus, "session-tree::ensure", {"session_id": sid})
        assert again == {"session": info, "created": False}
        made = await self.call(bus, "session-tree::ensure", {"session_id": "chosen-id"})
        assert made["created"] is True
        assert made["session"]["session_id"] == "chosen-id"
        taken = {"session_id": "chosen-id"}
        assert await self.code_of(bus, "session-tree::create", taken) == "session_exists"
        missing = {"session_id": "nope"}
        assert await self.code_of(bus, "session-tree::get", missing) == "session_not_found"

    async def test_append_chains_to_the_active_leaf(self, bus: Engine) -> None:
        sid = await self.new_session(bus)
        first = (await self.append(bus, sid, "a", "one"))["entry"]
        second = (await self.append(bus, sid, "b", "two"))["entry"]
        third = (await self.append(bus, sid, None, "three"))["entry"]
        assert first["parent_id"] is None
        assert second["parent_id"] == "a"
        assert third["parent_id"] == "b"
        assert [first["seq"], second["seq"], third["seq"]] == [1, 2, 3]
        assert {e["session_id"] for e in (first, second, third)} == {sid}
        assert await self.path(bus, sid) == ["a", "b", third["entry_id"]]
        assert await self.texts(bus, sid) == ["one", "two", "three"]
        info = await self.call(bus, "session-tree::get", {"session_id": sid})
        assert info["entry_count"] == 3
        assert info["leaf_id"] == third["entry_id"]

    async def test_append_is_idempotent_by_entry_id(self, bus: Engine) -> None:
        sid = await self.new_session(bus)
        stored = await self.append(bus, sid, "a", "one")
        assert stored["created"] is True
        again = await self.append(bus, sid, "a", "one")
        assert again == {"entry": stored["entry"], "created": False}
        await self.append(bus, sid, "b", "two")
        late = await self.append(bus, sid, "a", "one, redelivered after b")
        assert late == {"entry": stored["entry"], "created": False}
        assert await self.path(bus, sid) == ["a", "b"]
        info = await self.call(bus, "session-tree::get", {"session_id": sid})
        assert (info["entry_count"], info["leaf_id"]) == (2, "b")

    async def test_an_explicit_parent_branches_and_moves_the_leaf(self, bus: Engine) -> None:
        sid = await self.new_session(bus)
        for entry_id in "abc":
            await self.append(bus, sid, entry_id, entry_id)
        branch = (await self.append(bus, sid, "d", "d", parent_id="a"))["entry"]
        assert branch["parent_id"] == "a"
        assert await self.path(bus, sid) == ["a", "d"]
        assert await self.path(bus, sid, leaf_id="c") == ["a", "b", "c"]
        await self.append(bus, sid, "e", "e")
        assert await self.path(bus, sid) == ["a", "d", "e"]
        tree = await self.call(bus, "session-tree::tree", {"session_id": sid})
        assert tree["leaf_id"] == "e"
        [root] = tree["roots"]
        assert [e["entry_id"] for e in root["entries"]] == ["a"]
        runs = [[e["entry_id"] for e in child["entries"]] for child in root["children"]]
        assert runs == [["b", "c"], ["d", "e"]]

    async def test_unknown_ids_are_typed_errors(self, bus: Engine) -> None:
        sid = await self.new_session(bus)
        await self.append(bus, sid, "a", "a")
        ghost = {"session_id": "ghost", "message": user("x")}
        assert await self.code_of(bus, "session-tree::append", ghost) == "session_not_found"
        orphan = {"session_id": sid, "parent_id": "zz", "message": user("x")}
        assert await self.code_of(bus, "session-tree::append", orphan) == "entry_not_found"
        leaf = {"session_id": sid, "leaf_id": "zz"}
        assert await self.code_of(bus, "session-tree::messages", leaf) == "entry_not_found"
        fork = {"source_session_id": sid, "from_entry_id": "zz"}
        assert await self.code_of(bus, "session-tree::fork", fork) == "entry_not_found"
        for function_id, payload in [
            ("session-tree::messages", {"session_id": "ghost"}),
            ("session-tree::tree", {"session_id": "ghost"}),
            ("session-tree::clone", {"source_session_id": "ghost"}),
            ("session-tree::fork", {"source_session_id": "ghost", "from_entry_id": "a"}),
            ("session-inbox::push", {"session_id": "ghost", "name": "steering", "item": user("")}),
        ]:
            assert await self.code_of(bus, function_id, payload) == "session_not_found"
        assert await self.path(bus, sid) == ["a"]

    async def test_bad_payloads_are_invalid_requests(self, bus: Engine) -> None:
        sid = await self.new_session(bus)
        for payload in [
            {"session_id": sid, "message": {"role": "robot", "content": []}},
            {"session_id": sid, "message": {"role": "user"}},
            {"session_id": sid, "entry_id": "a/b", "message": user("x")},
            {"session_id": sid},
        ]:
            assert await self.code_of(bus, "session-tree::append", payload) == "invalid_request"
        assert await self.code_of(bus, "session-tree::create", {"session_id": "a/b"}) == (
            "invalid_request"
        )
        assert await self.path(bus, sid) == []

    async def test_append_batch_chains_once_and_is_idempotent_per_entry(self, bus: Engine) -> None:
        sid = await self.new_session(bus)
        await self.append(bus, sid, "root", "root")
        batch = {
            "session_id": sid,
            "entries": [{"entry_id": f"b{i}", "message": user(f"b{i}")} for i in range(3)],
        }
        first = await self.call(bus, "session-tree::append_batch", batch)
        entries = [r["entry"] for r in first["results"]]
        assert [r["created"] for r in first["results"]] == [True, True, True]
        assert [e["parent_id"] for e in entries] == ["root", "b0", "b1"]
        grown = {**batch, "entries": [*batch["entries"], {"entry_id": "b3", "message": user("")}]}
        second = await self.call(bus, "session-tree::append_batch", grown)
        assert [r["created"] for r in second["results"]] == [False, False, False, True]
        assert second["results"][3]["entry"]["parent_id"] == "b2"
        assert await self.path(bus, sid) == ["root", "b0", "b1", "b2", "b3"]
        side = {"session_id": sid, "parent_id": "root", "entries": [{"message": user("s")}] * 2}
        third = await self.call(bus, "session-tree::append_batch", side)
        side_ids = [r["entry"]["entry_id"] for r in third["results"]]
        assert await self.path(bus, sid) == ["root", *side_ids]
        info = await self.call(bus, "session-tree::get", {"session_id": sid})
        assert info["entry_count"] == 7

    # -- fork and clone ------------------------------------------------------------------------
    async def test_a_fork_keeps_every_entry_of_a_long_history(self, bus: Engine) -> None:
        sid = await self.new_session(bus, cwd="/repo")
        entries = [{"entry_id": f"e{i:03d}", "message": user(f"m{i}")} for i in range(200)]
        for start in range(0, 200, 50):
            chunk = {"session_id": sid, "entries": entries[start : start + 50]}
            await self.call(bus, "session-tree::append_batch", chunk)
        full = [f"e{i:03d}" for i in range(200)]
        fork = await self.call(
            bus, "session-tree::fork", {"source_session_id": sid, "from_entry_id": "e199"}
        )
        assert fork["origin"]["source_session_id"] == sid
        assert fork["origin"]["from_entry_id"] == "e199"
        assert fork["cwd"] == "/repo"
        fid = fork["session_id"]
        assert await self.path(bus, fid) == full
        for i in range(3):
            await self.append(bus, fid, f"f{i}", f"fork {i}")
        assert await self.path(bus, fid) == [*full, "f0", "f1", "f2"]
        assert (await self.texts(bus, fid))[:2] == ["m0", "m1"]
        middle = await self.call(
            bus, "session-tree::fork", {"source_session_id": sid, "from_entry_id": "e120"}
        )
        assert await self.path(bus, middle["session_id"]) == full[:121]
        assert await self.path(bus, sid) == full  # the source is untouched

    async def test_a_fork_of_a_fork(self, bus: Engine) -> None:
        sid = await self.new_session(bus)
        for i in range(10):
            await self.append(bus, sid, f"s{i}", f"s{i}")
        first = await self.call(
            bus, "session-tree::fork", {"source_session_id": sid, "from_entry_id": "s6"}
        )
        f1 = first["session_id"]
        for i in range(3):
            await self.append(bus, f1, f"a{i}", f"a{i}")
        second = await self.call(
            bus, "session-tree::fork", {"source_session_id": f1, "from_entry_id": "a1"}
        )
        f2 = second["session_id"]
        await self.append(bus, f2, "b0", "b0")
        s = [f"s{i}" for i in range(10)]
        assert await self.path(bus, f2) == [*s[:7], "a0", "a1", "b0"]
        assert await self.path(bus, f1) == [*s[:7], "a0", "a1", "a2"]
        # fork from history the source shares rather than owns
        third = await self.call(
            bus, "session-tree::fork", {"source_session_id": f2, "from_entry_id": "s3"}
        )
        assert await self.path(bus, third["session_id"]) == s[:4]
        # a branch inside the shared history, and reading a shared leaf
        await self.append(bus, f2, "c0", "c0", parent_id="s2")
        assert await self.path(bus, f2) == [*s[:3], "c0"]
        assert await self.path(bus, f2, leaf_id="a0") == [*s[:7], "a0"]

    async def test_clone_shares_the_active_path_and_diverges(self, bus: Engine) -> None:
        sid = await self.new_session(bus)
        for entry_id in "abc":
            await self.append(bus, sid, entry_id, entry_id)
        await self.append(bus, sid, "d", "d", parent_id="a")
        clone = await self.call(bus, "session-tree::clone", {"source_session_id": sid})
        cid = clone["session_id"]
        assert clone["origin"]["kind"] == "clone"
        assert await self.path(bus, cid) == ["a", "d"]
        await self.append(bus, cid, "x", "x")
        await self.append(bus, sid, "y", "y")
        assert await self.path(bus, cid) == ["a", "d", "x"]
        assert await self.path(bus, sid) == ["a", "d", "y"]
        empty = await self.new_session(bus)
        blank = await self.call(bus, "session-tree::clone", {"source_session_id": empty})
        assert await self.path(bus, blank["session_id"]) == []

    async def test_the_tree_of_a_fork_shows_its_shared_history(self, bus: Engine) -> None:
        sid = await self.new_session(bus)
        for entry_id in "abc":
            await self.append(bus, sid, entry_id, entry_id)
        fork = await self.call(
            bus, "session-tree::fork", {"source_session_id": sid, "from_entry_id": "b"}
        )
        fid = fork["session_id"]
        await self.append(bus, fid, "x", "x")
        await self.append(bus, fid, "y", "y", parent_id="b")
        tree = await self.call(bus, "session-tree::tree", {"session_id": fid})
        [root] = tree["roots"]
        assert [e["entry_id"] for e in root["entries"]] == ["a", "b"]
        assert [e["session_id"] for e in root["entries"]] == [sid, sid]
        runs = [[e["entry_id"] for e in child["entries"]] for child in root["children"]]
        assert runs == [["x"], ["y"]]  # "c" is the source's, not this session's history
        assert (tree["leaf_id"], tree["leaf_session_id"]) == ("y", fid)

    # -- listing -------------------------------------------------------------------------------
    async def test_list_pages_through_every_session_once(self, bus: Engine) -> None:
        created = [await self.new_session(bus, display_name=f"n{i}") for i in range(120)]
        await self.append(bus, created[5], "a", "hello there")
        for order, expected in (("desc", created[::-1]), ("asc", created)):
            seen: list[str] = []
            cursor = None
            while True:
                payload = {"limit": 25, "order": order, "cursor": cursor}
                page = await self.call(bus, "session-tree::list", payload)
                assert len(page["sessions"]) <= 25
                seen += [s["session_id"] for s in page["sessions"]]
                cursor = page["next_cursor"]
                if cursor is None:
                    break
            assert seen == expected
        page = await self.call(bus, "session-tree::list", {"limit": 200, "order": "asc"})
        info = page["sessions"][5]
        assert (info["display_name"], info["entry_count"], info["leaf_id"]) == ("n5", 1, "a")
        assert info["last_message_preview"] == "hello there"
        bad = {"cursor": "not-a-cursor"}
        assert await self.code_of(bus, "session-tree::list", bad) == "invalid_cursor"

    async def test_delete_removes_a_session_unless_others_share_its_history(
        self, bus: Engine
    ) -> None:
        sid = await self.new_session(bus, session_id="doomed")
        for entry_id in "ab":
            await self.append(bus, sid, entry_id, entry_id)
        inbox = {"session_id": sid, "name": "steering", "item": user("s")}
        await self.call(bus, "session-inbox::push", inbox)
        fork = {"source_session_id": sid, "from_entry_id": "a", "session_id": "doomed-fork"}
        await self.call(bus, "session-tree::fork", fork)
        failure = await self.failure(bus, "session-tree::delete", {"session_id": sid})
        assert failure.remote_code == "session_shared"
        assert "doomed-fork" in failure.message
        assert await self.path(bus, sid) == ["a", "b"]
        fork_gone = await self.call(bus, "session-tree::delete", {"session_id": "doomed-fork"})
        assert (fork_gone["entries"], fork_gone["inboxes"]) == (0, 0)
        gone = await self.call(bus, "session-tree::delete", {"session_id": sid})
        assert (gone["session_id"], gone["entries"], gone["inboxes"]) == (sid, 2, 1)
        for function_id in ("session-tree::get", "session-tree::delete"):
            assert await self.code_of(bus, function_id, {"session_id": sid}) == "session_not_found"
        page = await self.call(bus, "session-tree::list", {"limit": 500})
        assert sid not in [info["session_id"] for info in page["sessions"]]
        steering = {"session_id": sid, "name": "steering"}
        assert await self.call(bus, "session-inbox::peek", steering) == {"items": []}
        again = await self.call(bus, "session-tree::ensure", {"session_id": sid})
        assert (again["created"], again["session"]["entry_count"]) == (True, 0)
        assert await self.path(bus, sid) == []

    # -- inbox ---------------------------------------------------------------------------------
    async def test_inbox_push_peek_and_drain(self, bus: Engine) -> None:
        sid = await self.new_session(bus)
        steering = {"session_id": sid, "name": "steering"}
        assert await self.call(bus, "session-inbox::drain", steering) == {"items": []}
        for i in range(3):
            pushed = await self.call(bus, "session-inbox::push", {**steering, "item": user(f"{i}")})
            assert pushed == {"count": i + 1}
        await self.call(
            bus, "session-inbox::push", {"session_id": sid, "name": "followup", "item": user("f")}
        )
        peeked = await self.call(bus, "session-inbox::peek", steering)
        assert [text(m) for m in peeked["items"]] == ["0", "1", "2"]
        assert await self.call(bus, "session-inbox::peek", steering) == peeked
        assert await self.call(bus, "session-inbox::drain", steering) == peeked
        assert await self.call(bus, "session-inbox::drain", steering) == {"items": []}
        followup = await self.call(bus, "session-inbox::peek", {**steering, "name": "followup"})
        assert [text(m) for m in followup["items"]] == ["f"]
        bad = {**steering, "item": {"role": "robot"}}
        assert await self.code_of(bus, "session-inbox::push", bad) == "invalid_request"

    async def test_messages_since_an_entry_lists_only_what_came_after(self, bus: Engine) -> None:
        sid = await self.new_session(bus)
        for i in range(5):
            await self.append(bus, sid, f"e{i}", f"m{i}")
        reply = await self.call(
            bus, "session-tree::messages", {"session_id": sid, "since_entry_id": "e2"}
        )
        assert reply["partial"] is True
        assert [item["entry_id"] for item in reply["messages"]] == ["e3", "e4"]
        assert reply["leaf_id"] == "e4"
        latest = {"session_id": sid, "since_entry_id": "e4"}
        assert (await self.call(bus, "session-tree::messages", latest))["messages"] == []
        # A branch from e1 becomes active: e2 is not on the path any more, the whole path comes.
        await self.append(bus, sid, "b1", "branch", parent_id="e1")
        stale = {"session_id": sid, "since_entry_id": "e2"}
        reply = await self.call(bus, "session-tree::messages", stale)
        assert reply["partial"] is False
        assert [item["entry_id"] for item in reply["messages"]] == ["e0", "e1", "b1"]

    async def test_inbox_remove_takes_exactly_what_was_peeked(self, bus: Engine) -> None:
        """Peek, commit, remove: a repeated remove removes nothing; later pushes stay."""
        sid = await self.new_session(bus)
        steering = {"session_id": sid, "name": "steering"}
        for i in range(2):
            await self.call(bus, "session-inbox::push", {**steering, "item": user(f"{i}")})
        peeked = (await self.call(bus, "session-inbox::peek", steering))["items"]
        await self.call(bus, "session-inbox::push", {**steering, "item": user("late")})
        removal = {**steering, "items": peeked}
        assert await self.call(bus, "session-inbox::remove", removal) == {"removed": 2}
        assert await self.call(bus, "session-inbox::remove", removal) == {"removed": 0}
        left = await self.call(bus, "session-inbox::peek", steering)
        assert [text(m) for m in left["items"]] == ["late"]
        only_late = {**steering, "items": left["items"]}
        assert await self.call(bus, "session-inbox::remove", only_late) == {"removed": 1}
        assert await self.call(bus, "session-inbox::peek", steering) == {"items": []}

    # -- concurrency ---------------------------------------------------------------------------
    async def test_concurrent_appends_are_all_kept_in_one_chain(self, bus: Engine) -> None:
        sid = await self.new_session(bus)
        await asyncio.gather(*(self.append(bus, sid, f"e{i}", f"m{i}") for i in range(50)))
        path = await self.path(bus, sid)
        assert sorted(path) == sorted(f"e{i}" for i in range(50))
        info = await self.call(bus, "session-tree::get", {"session_id": sid})
        assert info["entry_count"] == 50
        assert info["leaf_id"] == path[-1]
        tree = await self.call(bus, "session-tree::tree", {"session_id": sid})
        assert [len(root["entries"]) for root in tree["roots"]] == [50]

    async def test_concurrent_redeliveries_store_one_entry(self, bus: Engine) -> None:
        sid = await self.new_session(bus)
        results = await asyncio.gather(*(self.append(bus, sid, "same", "x") for _ in range(20)))
        assert [r["created"] for r in results].count(True) == 1
        assert len({r["entry"]["seq"] for r in results}) == 1
        assert await self.path(bus, sid) == ["same"]

    async def test_concurrent_drains_and_pushes_lose_and_repeat_nothing(self, bus: Engine) -> None:
        sid = await self.new_session(bus)
        inbox = {"session_id": sid, "name": "steering"}
        drained: list[str] = []

        async def drain_a_few() -> None:
            for _ in range(20):
                reply = await self.call(bus, "session-inbox::drain", inbox)
                drained.extend(text(m) for m in reply["items"])
                await asyncio.sleep(0)

        async def push(i: int) -> None:
            await self.call(bus, "session-inbox::push", {**inbox, "item": user(str(i))})

        await asyncio.gather(drain_a_few(), drain_a_few(), *(push(i) for i in range(100)))
        reply = await self.call(bus, "session-inbox::drain", inbox)
        drained.extend(text(m) for m in reply["items"])
        assert sorted(drained, key=int) == [str(i) for i in range(100)]
