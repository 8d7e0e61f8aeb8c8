"""Cedar: approver annotations, the principal's tenant and roles, and the shipped schema."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cedarpy
import pytest

from tackroom.contracts.approvers import ApproverRules
from tackroom.contracts.policy import CheckRequest
from tackroom.engine import InvocationError
from tackroom.kit.rulesfile import PolicyFileError
from tackroom.workers.policy_cedar.mapping import entities_for
from tackroom.workers.policy_cedar.policies import decide, parse_policies
from tackroom.workers.policy_cedar.worker import builtin_text, schema_text

from .test_worker import serve, write

POLICIES = """\
@id("deploys")
@reason("deploys need two admins")
@approvers_roles("admin, release")
@approvers_four_eyes
@approvers_quorum("2")
permit (principal, action == Action::"call_with_approval", resource in Namespace::"deploy");

@id("writes")
@approvers_roles("editor")
permit (principal, action in [Action::"call", Action::"call_with_approval"], resource)
when { resource == Function::"fs::write" && principal.tenant == "acme" };

@id("admins-read-secrets")
permit (principal in Role::"admin", action == Action::"call", resource == Function::"vault::get");
"""


def check(function_id: str, **fields: Any) -> tuple[str, str | None, ApproverRules | None]:
    policies = parse_policies(POLICIES, "policies.cedar")
    reply = decide(policies, CheckRequest(function_id=function_id, **fields), default="deny")
    return reply.decision, reply.rule_id, reply.approvers


def test_the_deciding_permits_annotations_are_the_approvers() -> None:
    assert check("deploy::prod") == (
        "needs_approval",
        "deploys",
        ApproverRules(roles=("admin", "release"), four_eyes=True, quorum=2),
    )
    # the same permit allows the call outright when it covers Action::"call": nobody to approve
    acme = {"principal": "bob", "tenant": "acme"}
    assert check("fs::write", **acme) == ("allow", "writes", None)
    assert check("fs::write", principal="bob", tenant="globex") == ("deny", "builtin:default", None)


def test_the_principal_has_its_tenant_and_roles() -> None:
    assert check("vault::get", principal="ann", roles=["admin"])[0] == "allow"
    assert check("vault::get", principal="ann", roles=["viewer"])[0] == "deny"
    assert check("vault::get", roles=["admin"])[0] == "deny"  # no principal holds no role
    by_uid = {(e["uid"]["type"], e["uid"]["id"]): e for e in entities_for("x::y", None)}
    assert by_uid[("Principal", "")]["attrs"] == {"tenant": "", "roles": []}
    entities = entities_for("x::y", "ann", roles=["admin", "admin"], tenant="acme")
    by_uid = {(e["uid"]["type"], e["uid"]["id"]): e for e in entities}
    assert by_uid[("Principal", "ann")]["attrs"] == {"tenant": "acme", "roles": ["admin"]}
    assert by_uid[("Principal", "ann")]["parents"] == [{"type": "Role", "id": "admin"}]
    assert ("Role", "admin") in by_uid
    local = {(e["uid"]["type"], e["uid"]["id"]): e for e in entities_for("x::y", "me")}
    assert local[("Principal", "me")]["attrs"]["tenant"] == "default"


ASK = 'permit (principal, action == Action::"call_with_approval", resource);\n'


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        ('@id("a")\n@approvers_quorum("2")\nforbid (principal, action, resource);\n', 2,
         "only a permit names approvers"),
        ('@id("a")\n@approvers_roles("admin")\n'
         'permit (principal, action == Action::"call", resource);\n', 2, "call_with_approval"),
        ('@id("a")\n@approvers_role("admin")\n' + ASK, 2, "did you mean @approvers_roles?"),
        ('@id("a")\n@approvers_roles(", ")\n' + ASK, 2, "name roles"),
        ('@id("a")\n@approvers_four_eyes("yes")\n' + ASK, 2, "true or false"),
        ('@id("a")\n@approvers_quorum("0")\n' + ASK, 2, "from 1 to 16"),
        ('@id("a")\n@approvers_quorum("two")\n' + ASK, 2, "from 1 to 16"),
    ],
)  # fmt: skip
def test_bad_approver_annotations_reject_the_file(text: str, line: int, reason: str) -> None:
    with pytest.raises(PolicyFileError) as caught:
        parse_policies(text, "policies.cedar")
    assert caught.value.line == line, str(caught.value)
    assert reason in str(caught.value)
    assert "policy 'a'" in str(caught.value)


def test_the_shipped_schema_parses_and_the_defaults_and_examples_fit_it() -> None:
    schema = cedarpy.Schema.from_str(schema_text())
    for text in (builtin_text(), POLICIES):
        result = cedarpy.validate_policies(text, schema)
        assert result.validation_passed, result.errors
    parse_policies(POLICIES, "policies.cedar", schema=schema)
    resources = """\
permit (principal, action in [Action::"read", Action::"fork"], resource)
when { resource.tenant == principal.tenant };
permit (principal in Role::"admin", action == Action::"budget_admin", resource);
permit (principal, action == Action::"approve", resource)
when { context has function_id && context.function_id like "deploy::*" };
"""
    assert cedarpy.validate_policies(resources, schema).validation_passed


def test_with_validate_schema_a_typo_rejects_the_file() -> None:
    schema = cedarpy.Schema.from_str(schema_text())
    typo = '@id("t")\npermit (principal, action == Action::"call", resource)\n' + (
        'when { principal.tenat == "acme" };\n'
    )
    parse_policies(typo, "p")  # without the schema, Cedar cannot tell
    with pytest.raises(PolicyFileError) as caught:
        parse_policies(typo, "p", schema=schema)
    assert caught.value.line == 1
    assert "policy 't' does not fit the schema" in str(caught.value)
    assert "tenat" in str(caught.value)


async def test_the_worker_validates_against_the_schema_when_asked(tmp_path: Path) -> None:
    path = tmp_path / "policies.cedar"
    write(path, POLICIES)
    async with serve(policies_path=str(path), validate_schema=True, reload_interval=0) as bus:
        reply = await bus.trigger(
            "policy::check_permissions", {"function_id": "deploy::prod", "principal": "bob"}
        )
        assert reply["approvers"]["quorum"] == 2
        write(path, POLICIES + '@id("bad")\npermit (principal, action, resource)\n'
              "when { principal.rols.isEmpty() };\n")  # fmt: skip
        with pytest.raises(InvocationError) as caught:
            await bus.trigger("policy::reload", {})
        assert caught.value.remote_code == "policy_file_invalid"
        assert "rols" in caught.value.message
