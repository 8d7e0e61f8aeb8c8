"""The ``access:`` section: its rules, its parsing (every rejection with its line), the built-in
table, and ``policy::authorize`` on a bus with hot reload."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from tackroom.contracts.policy import (
    AUTHORIZE,
    POLICY_STATUS,
    RESOURCE_ACTIONS,
    AuthorizeRequest,
    AuthorizeResponse,
    EmptyRequest,
    ResourceAction,
    ResourceRef,
)
from tackroom.contracts.principal import Principal
from tackroom.engine import Engine, open_engine
from tackroom.kit.rulesfile import PolicyFileError
from tackroom.runtime import HarnessConfig, Host
from tackroom.testing import MEMORY_URL, wait_until
from tackroom.workers.policy.access import AccessRule, AccessRules
from tackroom.workers.policy.loader import builtin_access, parse_rules
from tackroom.workers.policy.worker import WORKER


def ask(
    rules: AccessRules,
    roles: tuple[str, ...],
    action: str = "read",
    kind: str = "session",
    *,
    tenant: str = "acme",
    resource_tenant: str = "acme",
) -> AuthorizeResponse:
    request = AuthorizeRequest.model_validate(
        {
            "principal": Principal(id="alice", roles=roles, tenant=tenant),
            "action": action,
            "resource": ResourceRef.model_validate({"kind": kind, "tenant": resource_tenant}),
        }
    )
    return rules.decide(request)


def access_file(section: str) -> str:
    return "schema_version: 1\nrules: []\naccess:\n" + section


# -- the rules, pure ------------------------------------------------------------------------------


def test_deny_wins_whatever_the_order() -> None:
    allow = AccessRule(
        id="all", roles=frozenset({"*"}), actions=frozenset({"read"}), decision="allow"
    )
    deny = AccessRule(id="no", roles=frozenset({"x"}), actions=frozenset({"read"}), decision="deny")
    for order in ((allow, deny), (deny, allow)):
        rules = AccessRules(order)
        assert ask(rules, ("x",)).rule_id == "no"
        assert ask(rules, ("y",)).rule_id == "all"
        assert ask(rules, ()).decision == "allow"


def test_unless_roles_leaves_out_whoever_holds_one() -> None:
    rule = AccessRule(
        id="others",
        roles=frozenset({"*"}),
        unless_roles=frozenset({"viewer"}),
        actions=frozenset({"run"}),
        decision="allow",
    )
    rules = AccessRules((rule,))
    assert ask(rules, (), "run").decision == "allow"
    assert ask(rules, ("viewer",), "run").decision == "deny"
    assert ask(rules, ("viewer", "member"), "run").decision == "deny"


def test_nothing_is_allowed_without_a_rule() -> None:
    reply = ask(AccessRules(), ("admin",), "delete")
    assert (reply.decision, reply.rule_id) == ("deny", "builtin:default")
    assert reply.reason == "admin may not delete here: ask for a role that grants it"
    reply = ask(AccessRules(), (), "budget_admin")
    assert (
        reply.reason
        == "a principal with no role may not budget admin here: ask for a role that grants it"
    )


def test_another_tenant_is_denied_before_any_rule() -> None:
    reply = ask(builtin_access(), ("admin",), resource_tenant="globex")
    assert (reply.decision, reply.rule_id) == ("deny", "builtin:tenant")
    assert "acme" in (reply.reason or "")


def test_decisions_are_kept_per_role_set() -> None:
    rules = builtin_access()
    first = ask(rules, ("viewer",), "run")
    assert ask(rules, ("viewer",), "run") is first
    assert ask(rules, ("viewer",), "read", "trace").decision == "allow"


@pytest.mark.parametrize(
    ("roles", "granted"),
    [
        (("admin",), set(RESOURCE_ACTIONS)),
        (("member",), {"read", "stream", "run", "fork", "pin", "compact", "delete", "approve"}),
        (("approver",), {"read", "stream", "approve"}),
        (("viewer",), {"read", "stream"}),
        ((), {"read", "stream", "run", "fork", "pin", "compact", "delete"}),
        (("impersonate",), {"read", "stream", "run", "fork", "pin", "compact", "delete"}),
        (("viewer", "impersonate"), {"read", "stream"}),
        (("approver", "viewer"), {"read", "stream", "approve"}),
    ],
)
def test_the_builtin_table_is_the_gateways(roles: tuple[str, ...], granted: set[str]) -> None:
    allowed = {a for a in RESOURCE_ACTIONS if ask(builtin_access(), roles, a).decision == "allow"}
    assert allowed == granted


def test_a_file_without_access_gets_the_builtin_table() -> None:
    ruleset = parse_rules("schema_version: 1\nrules: []\n", "p.yaml")
    assert ruleset.access.builtin
    assert ruleset.access.rules == builtin_access().rules
    assert not parse_rules(access_file("  []\n"), "p.yaml").access.rules


def test_an_empty_access_section_denies_everything() -> None:
    rules = parse_rules("schema_version: 1\nrules: []\naccess: []\n", "p.yaml").access
    assert not rules.builtin
    assert ask(rules, ("admin",)).decision == "deny"


def test_a_good_section() -> None:
    text = access_file(
        "  - id: ops\n"
        "    roles: ops\n"
        "    unless_roles: [suspended]\n"
        "    actions: '*'\n"
        "    resources: [budget, catalog]\n"
        "    decision: allow\n"
        "    reason: >\n"
        "      ops run the\n"
        "      budgets\n"
    )
    (rule,) = parse_rules(text, "p.yaml").access.rules
    assert rule.roles == {"ops"}
    assert rule.unless_roles == {"suspended"}
    assert rule.actions == set(RESOURCE_ACTIONS)
    assert rule.resources == {"budget", "catalog"}
    assert (rule.reason, rule.line) == ("ops run the budgets", 4)
    assert ask(AccessRules((rule,)), ("ops",), "budget_admin", "budget").reason == (
        "ops run the budgets"
    )


RULE = "  - id: a\n    roles: [viewer]\n    actions: [read]\n    decision: allow\n"


@pytest.mark.parametrize(
    ("section", "line", "reason"),
    [
        ("  {a: 1}\n", 4, "access: expected a list of access rules, got a mapping"),
        (
            "  - id: a\n    roles: [viewer]\n    actions: [raed]\n    decision: allow\n",
            6,
            "unknown action 'raed'; did you mean 'read'?",
        ),
        (
            "  - id: a\n    roles: [viewer]\n    actions: [read]\n    decision: needs_approval\n",
            7,
            "needs_approval is for tool calls",
        ),
        (
            "  - id: a\n    roles: [viewer]\n    actions: [read]\n    decision: alow\n",
            7,
            "did you mean 'allow'?",
        ),
        ("  - id: a\n    roles: [viewer]\n    actions: [read]\n", 4, "missing 'decision'"),
        ("  - id: a\n    actions: [read]\n    decision: allow\n", 4, "missing 'roles'"),
        (RULE + "    roels: [x]\n", 8, "unknown key; did you mean 'roles'?"),
        (RULE + "    resources: [sessions]\n", 8, "did you mean 'session'?"),
        (RULE + "    unless_roles: [viewer]\n", 8, "in both roles and unless_roles"),
        (RULE + "    unless_roles: ['*']\n", 8, "would exclude every principal"),
        (RULE.replace("[viewer]", "['*', viewer]"), 5, "list no role with it"),
        (RULE.replace("[read]", "['*', read]"), 6, "name nothing else"),
        (RULE.replace("[viewer]", "[]"), 5, "a non-empty list"),
        (RULE.replace("[viewer]", "[view er]"), 5, "no spaces"),
        (RULE.replace("[viewer]", "7"), 5, "expected a string, got a number"),
        (RULE.replace("id: a", "id: 'builtin:x'"), 4, "reserved"),
        (RULE + RULE, 8, "access rule id 'a' is already used at line 4"),
    ],
)
def test_a_bad_rule_is_refused_with_its_line(section: str, line: int, reason: str) -> None:
    with pytest.raises(PolicyFileError) as caught:
        parse_rules(access_file(section), "permissions.yaml")
    assert caught.value.line == line, str(caught.value)
    assert reason in str(caught.value)
    assert str(caught.value).startswith(f"permissions.yaml:{line}: ")


# -- on a bus -------------------------------------------------------------------------------------


def write(path: Path, text: str) -> None:
    temporary = path.with_suffix(".tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


@asynccontextmanager
async def serve(**config: Any) -> AsyncIterator[Engine]:
    harness = HarnessConfig(schema_version=1, worker_config={"policy": config})
    async with Host(engine=open_engine(MEMORY_URL), workers=[WORKER], config=harness) as host:
        yield host.engine


async def authorize(bus: Engine, roles: tuple[str, ...], action: ResourceAction) -> str:
    request = AuthorizeRequest(
        principal=Principal(id="bob", roles=roles),
        action=action,
        resource=ResourceRef(kind="session", id="s", tenant="default"),
    )
    return (await AUTHORIZE.call(bus, request)).decision


async def test_the_section_is_hot_reloaded_with_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    async with serve(reload_interval=0.05) as bus:
        assert await authorize(bus, ("viewer",), "read") == "allow"
        status = await POLICY_STATUS.call(bus, EmptyRequest())
        assert status.access is not None
        assert status.access.source == "builtin"
        assert status.access.rule_count == len(builtin_access().rules)

        write(tmp_path / "permissions.yaml", "schema_version: 1\nrules: []\n")

        async def reloaded() -> bool:
            return (await POLICY_STATUS.call(bus, EmptyRequest())).source == "file"

        await wait_until(reloaded, timeout=5.0)
        status = await POLICY_STATUS.call(bus, EmptyRequest())
        assert status.access is not None
        assert status.access.source == "builtin"
        assert await authorize(bus, ("viewer",), "read") == "allow"

        write(tmp_path / "permissions.yaml", access_file(RULE.replace("viewer", "ops")))

        async def viewer_is_out() -> bool:
            return await authorize(bus, ("viewer",), "read") == "deny"

        await wait_until(viewer_is_out, timeout=5.0)
        assert await authorize(bus, ("ops",), "read") == "allow"
        status = await POLICY_STATUS.call(bus, EmptyRequest())
        assert status.access is not None
        assert (status.access.source, status.access.rule_count) == ("file", 1)
        assert status.rule_count == 0
