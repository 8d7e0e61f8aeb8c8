"""The contract of a hooks worker (``hook-fanout::*``), by function id.

Any worker that replaces ``hooks`` proves it fits by running this suite: subclass
:class:`HooksContract` in a ``test_*.py`` module and name the worker::

    class TestMyHooks(HooksContract):
        worker_name = "my-hooks"

Every check goes through ``engine.trigger``, except that subscriptions are read from state scope
``hook-subscriptions``: that scope is part of the contract (publishers watch it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

import pytest

from tackroom.engine import Engine, FunctionError
from tackroom.testing.contracts.base import WorkerContract

__all__ = ["HooksContract"]

SCOPE = "hook-subscriptions"


class HooksContract(WorkerContract):
    worker_name: ClassVar[str] = "hooks"

    # -- helpers -------------------------------------------------------------------------------
    async def subscriber(
        self,
        bus: Engine,
        topic: str,
        function_id: str,
        answer: Callable[[Any], Awaitable[Any]],
        *,
        priority: int = 0,
        seen: list[tuple[str, Any]] | None = None,
    ) -> None:
        """Register ``answer`` as ``function_id``, subscribe it, record its events in ``seen``."""

        async def handler(event: Any) -> Any:
            if seen is not None:
                seen.append((function_id, event))
            return await answer(event.get("payload"))

        await bus.register_function(function_id, handler, worker="contract-test")
        request = {"topic": topic, "function_id": function_id, "priority": priority}
        await self.call(bus, "hook-fanout::subscribe", request)

    async def publish(
        self, bus: Engine, topic: str, payload: Any, rule: str, timeout_ms: int = 2000
    ) -> dict[str, Any]:
        request = {"topic": topic, "payload": payload, "merge_rule": rule, "timeout_ms": timeout_ms}
        result: dict[str, Any] = await self.call(bus, "hook-fanout::publish_collect", request)
        assert result["schema_version"] == 1
        return result

    # -- subscriptions -------------------------------------------------------------------------
    async def test_subscribe_list_unsubscribe_and_the_state_scope(self, bus: Engine) -> None:
        subscribe = "hook-fanout::subscribe"
        await self.call(bus, subscribe, {"topic": "turn_end", "function_id": "b::x"})
        await self.call(bus, subscribe, {"topic": "turn_end", "function_id": "a::x"})
        await self.call(
            bus, subscribe, {"topic": "turn_end", "function_id": "c::x", "priority": -5}
        )
        await self.call(bus, subscribe, {"topic": "turn_end", "function_id": "a::x"})  # idempotent
        listed = await self.call(bus, "hook-fanout::list", {})
        order = [s["function_id"] for s in listed["topics"]["turn_end"]]
        assert order == ["c::x", "a::x", "b::x"]  # lower priority first, then by id

        stored = await bus.get_state(SCOPE, "turn_end")
        assert stored is not None
        assert stored.value["schema_version"] == 1
        assert [s["function_id"] for s in stored.value["subscribers"]] == order

        await self.call(
            bus, subscribe, {"topic": "turn_end", "function_id": "b::x", "priority": -9}
        )
        listed = await self.call(bus, "hook-fanout::list", {"topic": "turn_end"})
        assert listed["topics"]["turn_end"][0]["function_id"] == "b::x"

        for fid in ("a::x", "b::x", "c::x"):
            gone = await self.call(
                bus, "hook-fanout::unsubscribe", {"topic": "turn_end", "function_id": fid}
            )
            assert gone["removed"] is True
        again = {"topic": "turn_end", "function_id": "a::x"}
        assert (await self.call(bus, "hook-fanout::unsubscribe", again))["removed"] is False
        assert await bus.get_state(SCOPE, "turn_end") is None  # no subscriber, no key
        assert (await self.call(bus, "hook-fanout::list", {}))["topics"] == {}

    async def test_concurrent_subscriptions_all_land(self, bus: Engine) -> None:
        requests = [{"topic": "t", "function_id": f"h::{i:02}"} for i in range(20)]
        await asyncio.gather(*(self.call(bus, "hook-fanout::subscribe", r) for r in requests))
        listed = await self.call(bus, "hook-fanout::list", {"topic": "t"})
        assert len(listed["topics"]["t"]) == 20

    async def test_bad_requests_are_invalid_request(self, bus: Engine) -> None:
        bad_rule = {"topic": "t", "payload": 1, "merge_rule": "vote", "timeout_ms": 10}
        assert (
            await self.code_of(bus, "hook-fanout::publish_collect", bad_rule) == "invalid_request"
        )
        no_topic = {"function_id": "f"}
        assert await self.code_of(bus, "hook-fanout::subscribe", no_topic) == "invalid_request"

    # -- publish -------------------------------------------------------------------------------
    async def test_no_subscriber_echoes_the_payload(self, bus: Engine) -> None:
        for rule in ("first_block_wins", "transform", "observe"):
            result = await self.publish(bus, "nobody", {"x": 1}, rule)
            assert result["blocked"] is False
            assert result["payload"] == {"x": 1}
            assert result["subscribers"] == 0

    async def test_gate_first_block_in_call_order_wins(self, bus: Engine) -> None:
        seen: list[tuple[str, Any]] = []

        async def allow(payload: Any) -> Any:
            return None

        async def deny(payload: Any) -> Any:
            return {"block": True, "reason": f"no {payload['function_id']}"}

        async def deny_too(payload: Any) -> Any:
            return {"block": True, "reason": "second"}

        topic = "before_function_call"
        await self.subscriber(bus, topic, "g::allow", allow, priority=0, seen=seen)
        await self.subscriber(bus, topic, "g::deny", deny, priority=1, seen=seen)
        await self.subscriber(bus, topic, "g::deny_too", deny_too, priority=2)
        payload = {"function_id": "shell::run", "arguments": {"cmd": "rm -rf /"}}
        result = await self.publish(bus, topic, payload, "first_block_wins")
        assert result["blocked"] is True
        assert result["blocked_by"] == "g::deny"
        assert result["reason"] == "no shell::run"
        assert result["subscribers"] == 3
        event = dict(seen)["g::allow"]
        assert event == {"schema_version": 1, "topic": topic, "payload": payload}

    async def test_gate_that_allows_lets_the_call_through(self, bus: Engine) -> None:
        async def allow(payload: Any) -> Any:
            return {"block": False}

        await self.subscriber(bus, "before_function_call", "g::ok", allow)
        result = await self.publish(bus, "before_function_call", {"a": 1}, "first_block_wins")
        assert (result["blocked"], result["payload"], result["subscribers"]) == (False, {"a": 1}, 1)

    @pytest.mark.parametrize("failure", ["raises", "times_out", "unregistered", "bad_reply"])
    async def test_a_failing_gate_blocks_naming_it(self, bus: Engine, failure: str) -> None:
        async def broken(payload: Any) -> Any:
            if failure == "raises":
                raise FunctionError("boom", "the gate broke")
            if failure == "times_out":
                await asyncio.sleep(5)
            return "yes"  # bad_reply: not a hook reply

        if failure == "unregistered":
            request = {"topic": "before_function_call", "function_id": "g::ghost"}
            await self.call(bus, "hook-fanout::subscribe", request)
            fid = "g::ghost"
        else:
            fid = "g::broken"
            await self.subscriber(bus, "before_function_call", fid, broken)
        result = await self.publish(bus, "before_function_call", {}, "first_block_wins", 200)
        assert result["blocked"] is True
        assert result["blocked_by"] == fid
        assert fid in result["reason"]

    async def test_transform_rewrites_in_order(self, bus: Engine) -> None:
        async def redact(payload: Any) -> Any:
            return {"payload": {**payload, "text": payload["text"].replace("secret", "[redacted]")}}

        async def shout(payload: Any) -> Any:
            return {"payload": {**payload, "text": payload["text"].upper()}}

        async def quiet(payload: Any) -> Any:
            return None  # no change

        topic = "after_function_call"
        await self.subscriber(bus, topic, "t::shout", shout, priority=2)
        await self.subscriber(bus, topic, "t::redact", redact, priority=1)
        await self.subscriber(bus, topic, "t::quiet", quiet, priority=3)
        result = await self.publish(bus, topic, {"text": "the secret is 42"}, "transform")
        assert result["blocked"] is False
        assert result["payload"] == {"text": "THE [REDACTED] IS 42"}
        assert result["subscribers"] == 3

    @pytest.mark.parametrize("failure", ["raises", "times_out", "blocks"])
    async def test_a_failing_transform_blocks_and_leaks_nothing(
        self, bus: Engine, failure: str
    ) -> None:
        after: list[tuple[str, Any]] = []

        async def redactor(payload: Any) -> Any:
            if failure == "raises":
                raise RuntimeError("regex exploded")
            if failure == "times_out":
                await asyncio.sleep(5)
            return {"block": True, "reason": "cannot redact this"}

        async def later(payload: Any) -> Any:
            return {"payload": payload}

        topic = "after_function_call"
        await self.subscriber(bus, topic, "t::redactor", redactor, priority=0)
        await self.subscriber(bus, topic, "t::later", later, priority=1, seen=after)
        result = await self.publish(bus, topic, {"text": "secret"}, "transform", 200)
        assert result["blocked"] is True
        assert result["blocked_by"] == "t::redactor"
        assert result["payload"] is None
        assert "secret" not in str(result)
        assert after == []  # the chain stopped

    async def test_observers_all_run_and_failures_are_counted(self, bus: Engine) -> None:
        seen: list[tuple[str, Any]] = []

        async def fine(payload: Any) -> Any:
            return {"block": True, "payload": "ignored"}  # observers cannot block or rewrite

        async def broken(payload: Any) -> Any:
            raise RuntimeError("observer down")

        await self.subscriber(bus, "turn_end", "o::a", fine, seen=seen)
        await self.subscriber(bus, "turn_end", "o::b", broken, seen=seen)
        await self.subscriber(bus, "turn_end", "o::c", fine, seen=seen)
        result = await self.publish(bus, "turn_end", {"turn": 1}, "observe")
        assert result["blocked"] is False
        assert result["payload"] == {"turn": 1}
        assert (result["subscribers"], result["errors"]) == (3, 1)
        assert sorted(fid for fid, _ in seen) == ["o::a", "o::b", "o::c"]

    async def test_unsubscribed_functions_are_not_called(self, bus: Engine) -> None:
        seen: list[tuple[str, Any]] = []

        async def fine(payload: Any) -> Any:
            return None

        await self.subscriber(bus, "turn_end", "o::gone", fine, seen=seen)
        request = {"topic": "turn_end", "function_id": "o::gone"}
        await self.call(bus, "hook-fanout::unsubscribe", request)
        result = await self.publish(bus, "turn_end", {}, "observe")
        assert (result["subscribers"], seen) == (0, [])
