"""A ``needs_approval`` rule's ``approvers:`` block: parsed, checked, answered with the check."""

from __future__ import annotations

import pytest

from tackroom.contracts.approvers import ApproverRules
from tackroom.contracts.policy import CheckResponse
from tackroom.kit.rulesfile import PolicyFileError
from tackroom.workers.policy.loader import parse_rules
from tackroom.workers.policy.rules import evaluate

RULES = """\
schema_version: 1
rules:
  - id: deploys
    function: deploy::*
    decision: needs_approval
    approvers:
      roles: [admin, release]
      four_eyes: true
      quorum: 2
  - id: writes
    function: fs::write
    decision: needs_approval
    approvers: {roles: [editor]}
  - id: shell
    function: shell::run
    decision: needs_approval
"""


def test_the_rules_approvers_come_back_with_the_answer() -> None:
    ruleset = parse_rules(RULES, "permissions.yaml")
    reply = evaluate(ruleset, "deploy::prod", {}, default="deny")
    assert (reply.decision, reply.rule_id) == ("needs_approval", "deploys")
    assert reply.approvers == ApproverRules(roles=("admin", "release"), four_eyes=True, quorum=2)
    writes = evaluate(ruleset, "fs::write", {}, default="deny").approvers
    assert writes == ApproverRules(roles=("editor",))
    assert (writes.four_eyes, writes.quorum) == (False, 1)
    assert evaluate(ruleset, "shell::run", {}, default="deny").approvers is None
    assert evaluate(ruleset, "calc::add", {}, default="needs_approval").approvers is None


def test_an_answer_without_approvers_reads_and_dumps_as_before() -> None:
    old = {"schema_version": 1, "decision": "needs_approval", "rule_id": "r", "reason": "ask"}
    reply = CheckResponse.model_validate(old)
    assert reply.approvers is None
    assert reply.model_dump(mode="json", exclude_none=True) == old
    assert "approvers" not in reply.model_dump(mode="json")
    with_them = CheckResponse.model_validate({**old, "approvers": {"roles": ["admin"]}})
    assert with_them.model_dump(mode="json")["approvers"] == {
        "schema_version": 1,
        "roles": ["admin"],
        "four_eyes": False,
        "quorum": 1,
    }
    with pytest.raises(ValueError, match="needs_approval only"):
        CheckResponse.model_validate({**old, "decision": "allow", "approvers": {"quorum": 2}})


def _rule(approvers: str, decision: str = "needs_approval") -> str:
    return (
        "schema_version: 1\nrules:\n  - id: r\n    function: x::y\n"
        f"    decision: {decision}\n    approvers: {approvers}\n"
    )


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (_rule("{roles: [admin]}", "allow"), "only a needs_approval rule names approvers"),
        (_rule("{}"), "name roles, four_eyes or quorum"),
        (_rule("{role: [admin]}"), "unknown key; did you mean 'roles'?"),
        (_rule("{roles: []}"), "non-empty list of role names"),
        (_rule("{roles: admin}"), "non-empty list of role names"),
        (_rule('{roles: ["a b"]}'), "a role name has no spaces"),
        (_rule("{four_eyes: yes}"), "expected true or false"),
        (_rule("{quorum: 0}"), "a whole number from 1 to 16"),
        (_rule("{quorum: 17}"), "a whole number from 1 to 16"),
        (_rule("{quorum: true}"), "a whole number from 1 to 16"),
        (_rule("{quorum: 1.5}"), "a whole number from 1 to 16"),
    ],
)
def test_bad_approvers_reject_the_file_with_the_line(text: str, reason: str) -> None:
    with pytest.raises(PolicyFileError) as caught:
        parse_rules(text, "permissions.yaml")
    assert caught.value.line == 6, str(caught.value)
    assert reason in str(caught.value)
    assert "rules[0].approvers" in str(caught.value)
