"""The flow-rule contract of a policy worker: prompt-injection containment, by function id.

Every policy worker applies the built-in flow rules of :mod:`tackroom.contracts.flow` to the
``flow`` facts of a ``policy::check_permissions`` request — after the protected functions and
before any rule of its own, so a rule file allowing everything does not unlock them — and its
config's ``flow_rules`` chooses which (``[]``: none). A replacement proves it with this suite:
subclass :class:`PolicyFlowContract`, name the worker and write :data:`FLOW_SCENARIO` in its
own rule language in :meth:`PolicyFlowContract.configure`::

    class TestMyPolicyFlow(PolicyFlowContract):
        worker_name = "my-policy"

        def configure(self, directory: Path) -> dict[str, Any]:
            (directory / "rules.txt").write_text(...)  # FLOW_SCENARIO, in your language
            return {"rules_file": str(directory / "rules.txt")}

Override :meth:`PolicyFlowContract.with_flow_rules` if the worker's config does not take the
shared ``flow_rules`` key.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest

from tackroom.engine import Engine
from tackroom.testing.contracts.base import WorkerContract

__all__ = ["FLOW_SCENARIO", "PolicyFlowContract"]

TIMEOUT = 5.0
CHECK = "policy::check_permissions"
FLOW = "builtin:flow:"

FLOW_SCENARIO = """\
One rule, "allow-all": allow every call (``*``, protected functions included — which must stay
denied); the default decision ``needs_approval``. The worker's flow rules are left to its
config (the default set unless the suite says otherwise).
"""

SECRET = {"side_effect": "external", "args_from_secret": {"body": ["auth::token"]}}
UNTRUSTED_URL = {
    "side_effect": "external",
    "sinks": ["url"],
    "args_from_untrusted": {"url": ["web::fetch"]},
}
TYPED_TO = {"side_effect": "external", "sinks": ["to"], "args_from_typed": {"to": ["q::extract"]}}
UNTRUSTED_BODY = {"side_effect": "external", "args_from_untrusted": {"body": ["web::fetch"]}}
UNTRUSTED_CONTEXT = {
    "side_effect": "external",
    "context_untrusted": True,
    "untrusted_sources": ["web::fetch"],
}


class PolicyFlowContract(WorkerContract):
    worker_name: ClassVar[str] = "policy"

    def configure(self, directory: Path) -> dict[str, Any]:
        """Write :data:`FLOW_SCENARIO` under ``directory``; return the worker's config section."""
        raise NotImplementedError

    def with_flow_rules(self, config: dict[str, Any], rules: Sequence[str]) -> dict[str, Any]:
        """``config`` with only the flow rules ``rules`` on."""
        return {**config, "flow_rules": list(rules)}

    @pytest.fixture
    async def bus(self, engine_url: str, tmp_path: Path) -> AsyncIterator[Engine]:
        """An engine serving the worker with the scenario and its default flow rules."""
        async with self.hosted(engine_url, self.configure(tmp_path)) as engine:
            yield engine

    # -- helpers -------------------------------------------------------------------------------
    @staticmethod
    async def check(bus: Engine, function_id: str, flow: Any = None) -> dict[str, Any]:
        payload: dict[str, Any] = {"function_id": function_id, "args": {"x": 1}}
        if flow is not None:
            payload["flow"] = flow
        reply = await bus.trigger(CHECK, payload, timeout=TIMEOUT)
        assert isinstance(reply, dict)
        assert reply["decision"] in ("allow", "deny", "needs_approval")
        assert isinstance(reply["reason"], str)
        assert reply["reason"]
        return reply

    async def decision(self, bus: Engine, function_id: str, flow: Any = None) -> tuple[str, Any]:
        reply = await self.check(bus, function_id, flow)
        return reply["decision"], reply.get("rule_id")

    # -- the default set -----------------------------------------------------------------------
    async def test_a_secret_sent_out_is_denied(self, bus: Engine) -> None:
        reply = await self.check(bus, "tool::send_mail", SECRET)
        assert (reply["decision"], reply["rule_id"]) == ("deny", FLOW + "secret-out")
        assert reply["matched_constraint"] == {"arg": "body", "op": "flow", "value": "secret-out"}
        assert "body" in reply["reason"]
        assert "auth::token" in reply["reason"]

    async def test_a_destination_copied_from_untrusted_content_is_denied(self, bus: Engine) -> None:
        reply = await self.check(bus, "http::fetch", UNTRUSTED_URL)
        assert (reply["decision"], reply["rule_id"]) == ("deny", FLOW + "untrusted-destination")
        assert reply["matched_constraint"] == {
            "arg": "url",
            "op": "flow",
            "value": "untrusted-destination",
        }
        assert "web::fetch" in reply["reason"]
        # Whatever the tool says it changes: a destination is a destination.
        reading = {**UNTRUSTED_URL, "side_effect": "none"}
        assert await self.decision(bus, "http::fetch", reading) == (
            "deny",
            FLOW + "untrusted-destination",
        )

    async def test_a_destination_a_quarantined_reader_typed_needs_approval(
        self, bus: Engine
    ) -> None:
        reply = await self.check(bus, "tool::send_mail", TYPED_TO)
        assert (reply["decision"], reply["rule_id"]) == (
            "needs_approval",
            FLOW + "typed-destination",
        )
        assert reply["matched_constraint"] == {
            "arg": "to",
            "op": "flow",
            "value": "typed-destination",
        }

    async def test_an_untrusted_argument_to_an_external_tool_needs_approval(
        self, bus: Engine
    ) -> None:
        reply = await self.check(bus, "tool::send_mail", UNTRUSTED_BODY)
        assert (reply["decision"], reply["rule_id"]) == (
            "needs_approval",
            FLOW + "untrusted-arguments",
        )
        assert reply["matched_constraint"] == {
            "arg": "body",
            "op": "flow",
            "value": "untrusted-arguments",
        }

    async def test_secrets_and_untrusted_arguments_inside_are_left_to_the_rules(
        self, bus: Engine
    ) -> None:
        for effect in ("none", "internal"):
            for flow in (SECRET, UNTRUSTED_BODY):
                assert await self.decision(bus, "fs::write", {**flow, "side_effect": effect}) == (
                    "allow",
                    "allow-all",
                ), (flow, effect)

    async def test_an_external_call_from_an_untrusted_context_asks_by_default(
        self, bus: Engine
    ) -> None:
        assert await self.decision(bus, "tool::send_mail", UNTRUSTED_CONTEXT) == (
            "needs_approval",
            FLOW + "untrusted-context",
        )
        inside = {**UNTRUSTED_CONTEXT, "side_effect": "internal"}
        assert await self.decision(bus, "fs::write", inside) == ("allow", "allow-all")

    async def test_a_denial_comes_before_an_approval(self, bus: Engine) -> None:
        # typed-destination and untrusted-arguments would ask; untrusted-destination denies.
        both = {
            "side_effect": "external",
            "sinks": ["to", "url"],
            "args_from_typed": {"to": ["q::extract"]},
            "args_from_untrusted": {"body": ["web::fetch"], "url": ["web::fetch"]},
        }
        assert await self.decision(bus, "http::post", both) == (
            "deny",
            FLOW + "untrusted-destination",
        )
        with_secret = {**both, "args_from_secret": {"body": ["auth::token"]}}
        assert await self.decision(bus, "http::post", with_secret) == (
            "deny",
            FLOW + "secret-out",
        )

    async def test_a_call_without_facts_or_with_clean_facts_is_left_to_the_rules(
        self, bus: Engine
    ) -> None:
        assert await self.decision(bus, "tool::send_mail") == ("allow", "allow-all")
        assert await self.decision(bus, "tool::send_mail", {}) == ("allow", "allow-all")
        assert await self.decision(bus, "tool::send_mail", {"schema_version": 1}) == (
            "allow",
            "allow-all",
        )

    @pytest.mark.parametrize("function_id", ["approval::resolve", "policy::reload", "state::set"])
    async def test_a_protected_function_is_denied_as_protected_first(
        self, bus: Engine, function_id: str
    ) -> None:
        for flow in (SECRET, UNTRUSTED_URL, UNTRUSTED_BODY):
            assert await self.decision(bus, function_id, flow) == ("deny", "builtin:protected")

    @pytest.mark.parametrize(
        "flow",
        [
            "yes",
            ["context_untrusted"],
            {"side_effect": "sometimes"},
            {"args_from_untrusted": {"url": "web::fetch"}},
            {"sinks": "url"},
            {"schema_version": 2},
            {"surprise": True},
        ],
    )
    async def test_malformed_flow_facts_are_typed_errors(self, bus: Engine, flow: Any) -> None:
        payload = {"function_id": "tool::send_mail", "args": {}, "flow": flow}
        assert await self.code_of(bus, CHECK, payload) == "invalid_request"

    # -- the configured set --------------------------------------------------------------------
    async def test_no_flow_rules_leaves_every_call_to_the_rules(
        self, engine_url: str, tmp_path: Path
    ) -> None:
        config = self.with_flow_rules(self.configure(tmp_path), [])
        async with self.hosted(engine_url, config) as bus:
            for flow in (SECRET, UNTRUSTED_URL, TYPED_TO, UNTRUSTED_BODY, UNTRUSTED_CONTEXT):
                assert await self.decision(bus, "tool::send_mail", flow) == (
                    "allow",
                    "allow-all",
                ), flow
            assert await self.decision(bus, "approval::resolve", SECRET) == (
                "deny",
                "builtin:protected",
            )

    async def test_only_the_configured_flow_rules_apply(
        self, engine_url: str, tmp_path: Path
    ) -> None:
        config = self.with_flow_rules(self.configure(tmp_path), ["untrusted-context"])
        async with self.hosted(engine_url, config) as bus:
            reply = await self.check(bus, "tool::send_mail", UNTRUSTED_CONTEXT)
            assert (reply["decision"], reply["rule_id"]) == (
                "needs_approval",
                FLOW + "untrusted-context",
            )
            assert reply.get("matched_constraint") is None
            assert "web::fetch" in reply["reason"]
            inside = {**UNTRUSTED_CONTEXT, "side_effect": "internal"}
            assert await self.decision(bus, "fs::write", inside) == ("allow", "allow-all")
            for flow in (SECRET, UNTRUSTED_URL, TYPED_TO, UNTRUSTED_BODY):
                assert await self.decision(bus, "tool::send_mail", flow) == (
                    "allow",
                    "allow-all",
                ), flow
