"""The contract of ``policy::authorize``: who may do what to a resource, by function id.

A policy worker that serves it proves it fits by running this suite: subclass
:class:`AccessContract`, name the worker, and

- :meth:`~AccessContract.configure_shipped` returns a config in force with the worker's own
  default access rules, which must reproduce :data:`DEFAULT_TABLE`;
- :meth:`~AccessContract.configure` writes :data:`ACCESS_SCENARIO` in the worker's rule language
  and returns the config (hot reload off: the suite reloads itself);
- :meth:`~AccessContract.break_access` rewrites those rules with one bad rule and returns the
  line the worker must name when it refuses them::

    class TestMyAccess(AccessContract):
        worker_name = "my-policy"

        def configure_shipped(self, directory: Path) -> dict[str, Any]:
            return {"rules_file": str(directory / "absent.txt")}

        def configure(self, directory: Path) -> dict[str, Any]:
            (directory / "access.txt").write_text(...)  # ACCESS_SCENARIO, in your language
            return {"access_file": str(directory / "access.txt")}

        def break_access(self, directory: Path) -> int:
            (directory / "access.txt").write_text(...)  # with one bad rule
            return 7

Every request goes through ``engine.trigger`` only.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest

from tackroom.contracts.policy import (
    AUTHORIZE,
    POLICY_FILE_INVALID,
    POLICY_RELOAD,
    RESOURCE_ACTIONS,
    RESOURCE_KINDS,
)
from tackroom.engine import Engine
from tackroom.testing.contracts.base import WorkerContract

__all__ = ["ACCESS_SCENARIO", "DEFAULT_TABLE", "OTHERS", "AccessContract"]

TIMEOUT = 5.0

ACCESS_SCENARIO = """\
The access rules every runner writes in its worker's language (rule ids in quotes):

1. "staff": a principal holding the role ``staff`` may ``read``, ``stream`` and ``run`` sessions
   and traces.
2. "auditors": one holding ``auditor`` may ``read`` every kind of resource.
3. "catalog": any principal — one holding no role at all too — may ``read`` the catalog.
4. "frozen": one holding ``frozen`` may do nothing, reason ``account frozen``: this deny wins
   over every allow above.
5. "no-interns-on-budgets": one holding ``intern`` may not ``read`` a budget (an auditor who is
   an intern reads every other kind).

Nothing else is allowed.
"""

OTHERS = ""
"""In :data:`DEFAULT_TABLE`: a principal holding none of the table's roles."""

_MEMBER = ("read", "stream", "run", "fork", "pin", "compact", "delete")
DEFAULT_TABLE: dict[str, frozenset[str]] = {
    "admin": frozenset(RESOURCE_ACTIONS),
    "member": frozenset((*_MEMBER, "approve")),
    "approver": frozenset(("read", "stream", "approve")),
    "viewer": frozenset(("read", "stream")),
    OTHERS: frozenset(_MEMBER),
}
"""The shipped access rules: what each role may do, on every kind of resource; a principal
holding several roles may do what any of them may."""


def expected_actions(roles: Sequence[str]) -> frozenset[str]:
    known = [DEFAULT_TABLE[role] for role in roles if role and role in DEFAULT_TABLE]
    if not known:
        return DEFAULT_TABLE[OTHERS]
    return frozenset().union(*known)


class AccessContract(WorkerContract):
    worker_name: ClassVar[str] = "policy"

    def configure_shipped(self, directory: Path) -> dict[str, Any]:
        """A config section under which the worker's shipped access rules are in force."""
        raise NotImplementedError

    def configure(self, directory: Path) -> dict[str, Any]:
        """Write :data:`ACCESS_SCENARIO` under ``directory``; return the worker's config."""
        raise NotImplementedError

    def break_access(self, directory: Path) -> int:
        """Rewrite what :meth:`configure` wrote with one bad access rule (an unknown action);
        return the line the refusal must name."""
        raise NotImplementedError

    @pytest.fixture
    async def bus(self, engine_url: str, tmp_path: Path) -> AsyncIterator[Engine]:
        """The worker with :data:`ACCESS_SCENARIO`."""
        async with self.hosted(engine_url, self.configure(tmp_path)) as engine:
            yield engine

    @pytest.fixture
    async def shipped(self, engine_url: str, tmp_path: Path) -> AsyncIterator[Engine]:
        """The worker with its shipped access rules."""
        async with self.hosted(engine_url, self.configure_shipped(tmp_path)) as engine:
            yield engine

    # -- helpers -------------------------------------------------------------------------------
    @staticmethod
    def request(
        roles: Sequence[str],
        action: str,
        kind: str = "session",
        *,
        tenant: str = "acme",
        resource_tenant: str | None = None,
        resource_id: str | None = "acme:s-1",
    ) -> dict[str, Any]:
        return {
            "principal": {"id": "alice", "roles": list(roles), "tenant": tenant},
            "action": action,
            "resource": {"kind": kind, "id": resource_id, "tenant": resource_tenant or tenant},
        }

    @staticmethod
    async def answer(bus: Engine, payload: Any) -> dict[str, Any]:
        reply = await bus.trigger(AUTHORIZE.id, payload, timeout=TIMEOUT)
        assert isinstance(reply, dict)
        assert set(reply) <= {"schema_version", "decision", "rule_id", "reason"}, reply
        assert reply["schema_version"] == 1
        assert reply["decision"] in ("allow", "deny")
        reason = reply.get("reason")
        if reply["decision"] == "deny":
            assert isinstance(reason, str), reply
            assert reason.strip()
        if reason is not None:
            assert "\n" not in reason, "a reason is one line for a person"
        return reply

    async def decide(
        self, bus: Engine, roles: Sequence[str], action: str, kind: str = "session", **where: Any
    ) -> Any:
        reply = await self.answer(bus, self.request(roles, action, kind, **where))
        return reply["decision"], reply.get("rule_id")

    # -- the shipped rules ---------------------------------------------------------------------
    @pytest.mark.parametrize(
        "roles",
        [
            (),
            ("admin",),
            ("member",),
            ("approver",),
            ("viewer",),
            ("impersonate",),
            ("admin", "impersonate"),
            ("viewer", "impersonate"),
            ("member", "viewer"),
            ("approver", "viewer"),
        ],
    )
    async def test_the_shipped_rules_are_the_role_table(
        self, shipped: Engine, roles: tuple[str, ...]
    ) -> None:
        granted = expected_actions(roles)
        replies = await asyncio.gather(
            *(self.decide(shipped, roles, action) for action in RESOURCE_ACTIONS)
        )
        decided = {
            action: reply[0] for action, reply in zip(RESOURCE_ACTIONS, replies, strict=True)
        }
        assert decided == {a: "allow" if a in granted else "deny" for a in RESOURCE_ACTIONS}

    async def test_the_shipped_rules_hold_on_every_kind(self, shipped: Engine) -> None:
        for roles in [("viewer",), ("member",), ()]:
            granted = expected_actions(roles)
            for kind in RESOURCE_KINDS:
                for action in RESOURCE_ACTIONS:
                    decision, _ = await self.decide(shipped, roles, action, kind, resource_id=None)
                    assert decision == ("allow" if action in granted else "deny"), (
                        roles,
                        kind,
                        action,
                    )

    async def test_a_viewer_may_not_run_and_is_told_in_one_line(self, shipped: Engine) -> None:
        reply = await self.answer(shipped, self.request(["viewer"], "run"))
        assert reply["decision"] == "deny"
        assert len(reply["reason"]) <= 200, reply["reason"]

    async def test_another_tenants_resource_is_denied_even_to_an_admin(
        self, shipped: Engine
    ) -> None:
        for action in RESOURCE_ACTIONS:
            reply = await self.answer(
                shipped, self.request(["admin"], action, resource_tenant="globex")
            )
            assert (reply["decision"], reply["rule_id"]) == ("deny", "builtin:tenant")
        assert (await self.decide(shipped, ["admin"], "read", resource_tenant="acme"))[0] == (
            "allow"
        )

    # -- the scenario --------------------------------------------------------------------------
    async def test_allow(self, bus: Engine) -> None:
        for action in ("read", "stream", "run"):
            for kind in ("session", "trace"):
                assert await self.decide(bus, ["staff"], action, kind) == ("allow", "staff")
        assert await self.decide(bus, ["auditor"], "read", "budget") == ("allow", "auditors")

    async def test_no_rule_is_a_denial(self, bus: Engine) -> None:
        for roles, action, kind in [
            (["staff"], "delete", "session"),
            (["staff"], "read", "budget"),
            (["staff"], "approve", "approval"),
            (["auditor"], "run", "session"),
            (["stranger"], "read", "session"),
            ([], "read", "session"),
        ]:
            reply = await self.answer(bus, self.request(roles, action, kind))
            assert (reply["decision"], reply["rule_id"]) == ("deny", "builtin:default"), (
                roles,
                action,
                kind,
            )

    async def test_any_principal(self, bus: Engine) -> None:
        for roles in ([], ["stranger"], ["staff"]):
            assert await self.decide(bus, roles, "read", "catalog") == ("allow", "catalog")
        assert (await self.decide(bus, [], "stream", "catalog"))[0] == "deny"

    async def test_a_deny_wins_over_every_allow(self, bus: Engine) -> None:
        for roles, kind in [
            (["staff", "frozen"], "session"),
            (["frozen", "auditor"], "budget"),
            (["frozen"], "catalog"),
        ]:
            reply = await self.answer(bus, self.request(roles, "read", kind))
            assert (reply["decision"], reply["rule_id"]) == ("deny", "frozen")
            assert "account frozen" in reply["reason"]
        assert await self.decide(bus, ["auditor", "intern"], "read", "budget") == (
            "deny",
            "no-interns-on-budgets",
        )
        assert await self.decide(bus, ["auditor", "intern"], "read", "trace") == (
            "allow",
            "auditors",
        )

    async def test_another_tenants_resource_is_denied(self, bus: Engine) -> None:
        assert await self.decide(bus, ["staff"], "read", resource_tenant="globex") == (
            "deny",
            "builtin:tenant",
        )
        assert await self.decide(bus, [], "read", "catalog", resource_tenant="globex") == (
            "deny",
            "builtin:tenant",
        )
        assert await self.decide(bus, ["staff"], "read", tenant="globex") == ("allow", "staff")

    async def test_a_bad_access_rule_is_refused_with_its_line(
        self, bus: Engine, tmp_path: Path
    ) -> None:
        line = self.break_access(tmp_path)
        failure = await self.failure(bus, POLICY_RELOAD.id, {})
        assert failure.remote_code == POLICY_FILE_INVALID
        assert f":{line}:" in str(failure), str(failure)
        assert await self.decide(bus, ["staff"], "run") == ("allow", "staff")
        assert (await self.decide(bus, ["staff"], "delete"))[0] == "deny"

    # -- shapes --------------------------------------------------------------------------------
    @pytest.mark.parametrize(
        "change",
        [
            {"action": "reed"},
            {"action": None},
            {"resource": {"kind": "file", "id": "x", "tenant": "acme"}},
            {"resource": {"kind": "session", "id": "x"}},
            {"resource": {"kind": "session", "id": "x", "tenant": "Acme Corp"}},
            {"resource": {"kind": "session", "id": "", "tenant": "acme"}},
            {"resource": "acme:s-1"},
            {"principal": "alice"},
            {"principal": {"roles": ["admin"], "tenant": "acme"}},
            {"principal": {"id": "alice", "roles": "admin", "tenant": "acme"}},
            {"principal": {"id": "alice", "tenant": "acme", "admin": True}},
            {"surprise": True},
            {"schema_version": 2},
        ],
    )
    async def test_unknown_shapes_are_typed_errors(
        self, bus: Engine, change: dict[str, Any]
    ) -> None:
        payload = {**self.request(["staff"], "read"), **change}
        assert await self.code_of(bus, AUTHORIZE.id, payload) == "invalid_request"

    @pytest.mark.parametrize("payload", [None, {}, "read", ["read"]])
    async def test_no_request_at_all_is_a_typed_error(self, bus: Engine, payload: Any) -> None:
        assert await self.code_of(bus, AUTHORIZE.id, payload) == "invalid_request"

    async def test_concurrent_requests(self, bus: Engine) -> None:
        asks = [
            (["staff"], "run", "session"),
            (["staff", "frozen"], "run", "session"),
            ([], "read", "catalog"),
            (["auditor"], "delete", "session"),
        ]
        replies = await asyncio.gather(*(self.decide(bus, *ask) for _ in range(25) for ask in asks))
        assert set(replies) == {
            ("allow", "staff"),
            ("deny", "frozen"),
            ("allow", "catalog"),
            ("deny", "builtin:default"),
        }
