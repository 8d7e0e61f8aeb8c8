"""``policy::authorize`` in Cedar: the request Cedar sees, fail-closed errors, the access file
(built-in, ``./access.cedar``, a configured path), its hot reload and its refusals."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import cedarpy
import pytest

from tackroom.contracts.policy import (
    AUTHORIZE,
    AuthorizeRequest,
    ResourceAction,
    ResourceKind,
    ResourceRef,
)
from tackroom.contracts.principal import Principal
from tackroom.engine import Engine, InvocationError, open_engine
from tackroom.kit.rulesfile import PolicyFileError
from tackroom.runtime import HarnessConfig, Host, WorkerStartError, load_worker
from tackroom.testing import MEMORY_URL, wait_until
from tackroom.workers.policy_cedar.access import (
    AccessAnswers,
    access_entities,
    decide_access,
    parse_access,
)
from tackroom.workers.policy_cedar.policies import parse_policies
from tackroom.workers.policy_cedar.worker import builtin_access_text, schema_text

DEADLINE = 5.0


def request(
    roles: tuple[str, ...] = (),
    action: ResourceAction = "read",
    kind: ResourceKind = "session",
    *,
    user: str = "alice",
    resource_id: str | None = "acme:s-1",
    **principal: Any,
) -> AuthorizeRequest:
    return AuthorizeRequest(
        principal=Principal(id=user, roles=roles, tenant="acme", **principal),
        action=action,
        resource=ResourceRef(kind=kind, id=resource_id, tenant="acme"),
    )


# -- the request Cedar sees -----------------------------------------------------------------------


def test_the_entities() -> None:
    entities = access_entities(
        request(("viewer", "viewer", "ops"), method="api_key", on_behalf_of="carol")
    )
    principal, viewer, ops, resource = entities
    assert principal == {
        "uid": {"type": "Principal", "id": "alice"},
        "attrs": {
            "tenant": "acme",
            "roles": ["viewer", "ops"],
            "method": "api_key",
            "on_behalf_of": "carol",
        },
        "parents": [{"type": "Role", "id": "viewer"}, {"type": "Role", "id": "ops"}],
    }
    assert (viewer["uid"], ops["uid"]) == (
        {"type": "Role", "id": "viewer"},
        {"type": "Role", "id": "ops"},
    )
    assert resource == {
        "uid": {"type": "Session", "id": "acme:s-1"},
        "attrs": {"tenant": "acme"},
        "parents": [],
    }
    (*_, listing) = access_entities(request(kind="trace", resource_id=None))
    assert listing["uid"] == {"type": "Trace", "id": ""}
    assert "on_behalf_of" not in access_entities(request())[0]["attrs"]


def test_policies_see_the_principal_and_the_resource() -> None:
    policies = parse_access(
        '@id("own-sessions")\n'
        'permit (principal, action == Action::"delete", resource is Session)\n'
        "when { resource.tenant == principal.tenant && principal has method &&\n"
        '       principal.method == "oidc" &&\n'
        '       resource == Session::"acme:s-1" };\n'
        '@id("no-impersonated-budgets")\n'
        'forbid (principal, action == Action::"budget_admin", resource)\n'
        "when { principal has on_behalf_of };\n"
        '@id("admins")\n'
        'permit (principal in Role::"admin", action, resource);\n',
        "access.cedar",
        schema=cedarpy.Schema.from_str(schema_text()),
    )
    assert decide_access(policies, request(action="delete", method="oidc")).decision == "allow"
    assert decide_access(policies, request(action="delete", method="api_key")).decision == "deny"
    other = request(action="delete", method="oidc", resource_id="acme:s-2")
    assert decide_access(policies, other).rule_id == "builtin:default"
    admin = request(("admin",), "budget_admin", "budget")
    assert decide_access(policies, admin).rule_id == "admins"
    acting = request(("admin",), "budget_admin", "budget", on_behalf_of="root")
    reply = decide_access(policies, acting)
    assert (reply.decision, reply.rule_id) == ("deny", "no-impersonated-budgets")


def test_a_forbid_in_error_denies() -> None:
    policies = parse_access(
        '@id("all")\npermit (principal, action, resource);\n'
        '@id("careful")\n'
        'forbid (principal, action, resource) when { principal.on_behalf_of == "x" };\n',
        "access.cedar",
    )
    reply = decide_access(policies, request())
    assert (reply.decision, reply.rule_id) == ("deny", "careful")
    assert "could not be evaluated" in (reply.reason or "")
    assert "\n" not in (reply.reason or "")
    assert decide_access(policies, request(on_behalf_of="y")).decision == "allow"


def test_another_tenant_is_denied_before_cedar() -> None:
    policies = parse_access(builtin_access_text(), "access.cedar")
    crossing = AuthorizeRequest(
        principal=Principal(id="root", roles=("admin",), tenant="acme"),
        action="read",
        resource=ResourceRef(kind="session", id="globex:s", tenant="globex"),
    )
    assert decide_access(policies, crossing).rule_id == "builtin:tenant"


def test_answers_are_kept_per_request_and_per_policy_set() -> None:
    answers = AccessAnswers()
    policies = parse_access(builtin_access_text(), "access.cedar")
    first = answers.decide(policies, request(("viewer",), "run"))
    assert answers.decide(policies, request(("viewer",), "run")) is first
    assert answers.decide(policies, request(("viewer",), "read")).decision == "allow"
    everyone = parse_access('@id("all")\npermit (principal, action, resource);\n', "a.cedar")
    assert answers.decide(everyone, request(("viewer",), "run")).decision == "allow"


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        (
            '\n@id("a")\npermit (principal, action == Action::"call", resource);\n',
            3,
            'unknown action Action::"call"',
        ),
        (
            '@id("a")\npermit (principal, action == Action::"raed", resource);\n',
            2,
            'unknown action Action::"raed"',
        ),
        (
            '@id("a")\npermit (principal, action, resource is Sesion);\n',
            2,
            "unknown entity type 'Sesion'",
        ),
        (
            '@id("a")\npermit (principal, action, resource in Namespace::"fs");\n',
            2,
            "unknown entity type 'Namespace'",
        ),
        (
            '@id("a")\n@approvers_roles("x")\npermit (principal, action, resource);\n',
            2,
            "approvers belong in the tool-call policy file",
        ),
        (
            '@id("a")\npermit (principal, action, resource);\n'
            '@id("a")\nforbid (principal, action, resource);\n',
            3,
            "two policies have @id('a')",
        ),
    ],
)
def test_a_bad_access_file_is_refused_with_its_line(text: str, line: int, reason: str) -> None:
    with pytest.raises(PolicyFileError) as caught:
        parse_access(text, "access.cedar")
    assert caught.value.line == line, str(caught.value)
    assert reason in str(caught.value)


def test_the_schema_checks_access_policies() -> None:
    schema = cedarpy.Schema.from_str(schema_text())
    with pytest.raises(PolicyFileError, match="does not fit the schema"):
        parse_access(
            '@id("typo")\npermit (principal, action, resource) when { resource.tenat == "x" };\n',
            "access.cedar",
            schema=schema,
        )
    parse_access(builtin_access_text(), "access.cedar", schema=schema)


def test_the_tool_call_file_still_cannot_name_resource_actions() -> None:
    with pytest.raises(PolicyFileError, match=r'unknown action Action::"read"'):
        parse_policies('permit (principal, action == Action::"read", resource);\n', "p.cedar")
    with pytest.raises(PolicyFileError, match="unknown entity type 'Session'"):
        parse_policies("permit (principal, action, resource is Session);\n", "p.cedar")


# -- the worker -----------------------------------------------------------------------------------


def write(path: Path, text: str) -> None:
    temporary = path.with_suffix(".tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


@asynccontextmanager
async def serve(**config: Any) -> AsyncIterator[Engine]:
    harness = HarnessConfig(schema_version=1, worker_config={"policy-cedar": config})
    spec = load_worker("policy-cedar")
    async with Host(engine=open_engine(MEMORY_URL), workers=[spec], config=harness) as host:
        yield host.engine


async def decision(bus: Engine, roles: tuple[str, ...], action: ResourceAction = "run") -> str:
    reply = await AUTHORIZE.call(bus, request(roles, action))
    return reply.decision


ONLY_OPS = '@id("ops")\npermit (principal in Role::"ops", action, resource);\n'
BROKEN = ONLY_OPS + '\n@id("bad")\nforbid (principal, action == Action::"stram", resource);\n'


async def test_without_a_file_the_builtin_access_policies_apply(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    async with serve(reload_interval=0) as bus:
        assert await decision(bus, ("member",)) == "allow"
        assert await decision(bus, ("viewer",)) == "deny"
        status = await bus.trigger("policy::status", {})
        assert status["source"] == "builtin"
        access = status["access"]
        assert (access["source"], access["path"]) == ("builtin", str(tmp_path / "access.cedar"))
        assert (access["default_decision"], access["rule_count"]) == ("deny", 5)


async def test_access_cedar_in_the_working_directory_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "access.cedar", ONLY_OPS)
    async with serve(reload_interval=0) as bus:
        assert await decision(bus, ("ops",)) == "allow"
        assert await decision(bus, ("member",)) == "deny"
        assert (await bus.trigger("policy::status", {}))["access"]["source"] == "file"


async def test_a_bad_access_file_at_start_stops_the_worker(tmp_path: Path) -> None:
    path = tmp_path / "access.cedar"
    path.write_text(BROKEN, encoding="utf-8")
    with pytest.raises(WorkerStartError, match=r'access\.cedar:5: unknown action Action::"stram"'):
        async with serve(access_policies_path=str(path)):
            pass
    with pytest.raises(WorkerStartError, match="no such file"):
        async with serve(access_policies_path=str(tmp_path / "missing.cedar")):
            pass


async def test_hot_reload_and_a_rejected_access_file(tmp_path: Path) -> None:
    path = tmp_path / "access.cedar"
    write(path, builtin_access_text())
    async with serve(access_policies_path=str(path), reload_interval=0.02) as bus:
        assert await decision(bus, ("member",)) == "allow"
        write(path, ONLY_OPS)

        async def member_is_out() -> bool:
            return await decision(bus, ("member",)) == "deny"

        await wait_until(member_is_out, timeout=DEADLINE)
        write(path, BROKEN)

        async def rejected() -> bool:
            status = await bus.trigger("policy::status", {})
            return status["access"]["last_error"] is not None

        await wait_until(rejected, timeout=DEADLINE)
        status = await bus.trigger("policy::status", {})
        assert status["access"]["last_error"]["line"] == 5
        assert status["last_error"] is None
        assert await decision(bus, ("ops",)) == "allow"
        with pytest.raises(InvocationError) as caught:
            await bus.trigger("policy::reload", {})
        assert caught.value.remote_code == "policy_file_invalid"
        assert "access.cedar:5:" in str(caught.value)
