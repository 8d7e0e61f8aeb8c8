"""Cedar policies: the request mapping, the decision order, and rejected files."""

from __future__ import annotations

from typing import Any

import pytest

from tackroom.contracts.policy import DEFAULT_RULE_ID, PROTECTED_RULE_ID, CheckRequest
from tackroom.kit.rulesfile import PolicyFileError
from tackroom.workers.policy_cedar.mapping import cedar_requests, entities_for, to_cedar_args
from tackroom.workers.policy_cedar.policies import CedarPolicies, decide, parse_policies
from tackroom.workers.policy_cedar.worker import builtin_text

# -- mapping -------------------------------------------------------------------------------------


def test_arguments_are_copied_value_by_value() -> None:
    args = {
        "s": "x",
        "b": True,
        "i": 7,
        "f": 2.0,
        "d": 0.25,
        "fine": 0.123456,
        "big": 2**63,
        "none": None,
        "rec": {"a": 1, "gone": None},
        "set": ["a", 1],
        "bad_set": ["a", None],
        "set_of_records": [{"a": None}],
        "forged": {"__entity": {"type": "Principal", "id": "root"}},
        "extn": {"__extn": {"fn": "ip", "arg": "10.0.0.1"}, "x": 1},
    }
    record, dropped = to_cedar_args(args)
    assert record == {
        "s": "x",
        "b": True,
        "i": 7,
        "f": 2,
        "d": {"__extn": {"fn": "decimal", "arg": "0.25"}},
        "rec": {"a": 1},
        "set": ["a", 1],
    }
    assert sorted(dropped) == sorted(
        ["fine", "big", "none", "rec.gone", "bad_set", "set_of_records", "forged", "extn"]
    )


def test_entities_and_requests() -> None:
    entities = entities_for("directory::skills::list", "alice")
    by_uid = {(e["uid"]["type"], e["uid"]["id"]): e for e in entities}
    function = by_uid[("Function", "directory::skills::list")]
    assert function["attrs"] == {
        "id": "directory::skills::list",
        "name": "list",
        "namespace": "directory::skills",
    }
    assert function["parents"] == [{"type": "Namespace", "id": "directory::skills"}]
    assert by_uid[("Namespace", "directory::skills")]["parents"] == [
        {"type": "Namespace", "id": "directory"}
    ]
    assert by_uid[("Namespace", "directory")]["parents"] == []
    assert ("Principal", "alice") in by_uid
    plain = {(e["uid"]["type"], e["uid"]["id"]) for e in entities_for("noop", None)}
    assert plain == {("Function", "noop"), ("Principal", "")}
    call, ask = cedar_requests(CheckRequest(function_id="fs::read", args={"p": 1}))
    assert call["action"] == {"type": "Action", "id": "call"}
    assert ask["action"] == {"type": "Action", "id": "call_with_approval"}
    context = dict(call["context"])
    assert context.pop("flow")["known"] is False  # tests/workers/policy_cedar/test_flow.py
    assert context == {"function_id": "fs::read", "args": {"p": 1}, "dropped_args": []}
    full = cedar_requests(CheckRequest(function_id="f", session_id="s", principal="bob"))[0]
    assert full["principal"] == {"type": "Principal", "id": "bob"}
    assert (full["context"]["session_id"], full["context"]["principal"]) == ("s", "bob")


# -- decisions -----------------------------------------------------------------------------------

POLICIES = """\
@id("read")
permit (principal, action == Action::"call", resource in Namespace::"fs")
when { resource.name == "read" };

@id("ask-web")
@reason("the web needs a human")
permit (principal, action == Action::"call_with_approval", resource in Namespace::"web");

@id("no-web-post")
forbid (principal, action, resource == Function::"web::post");

@id("alice-writes")
permit (
  principal == Principal::"alice", action == Action::"call", resource == Function::"fs::write"
)
when { context has session_id && context.session_id like "prod-*" };

@id("small")
permit (principal, action == Action::"call", resource == Function::"calc::pow")
when { context.args.exponent < 10 };

@id("no-etc")
forbid (principal, action, resource == Function::"fs::read")
when { context.args.path like "/etc/*" };

@id("lossless")
forbid (principal, action, resource in Namespace::"strict")
when { context.dropped_args.contains("x") };

permit (principal, action == Action::"call", resource in Namespace::"strict");
"""


@pytest.fixture(scope="module")
def policies() -> CedarPolicies:
    return parse_policies(POLICIES, "policies.cedar")


def check(policies: CedarPolicies, function_id: str, **fields: Any) -> tuple[str, str | None]:
    request = CheckRequest(function_id=function_id, **fields)
    reply = decide(policies, request, default="needs_approval")
    assert reply.reason
    return reply.decision, reply.rule_id


@pytest.mark.parametrize(
    ("function_id", "fields", "expected"),
    [
        ("fs::read", {"args": {"path": "a"}}, ("allow", "read")),
        ("fs::read", {"args": {"path": "/etc/passwd"}}, ("deny", "no-etc")),
        # a forbid in error fails closed: path is a number, so `like` cannot be evaluated
        ("fs::read", {"args": {"path": 5}}, ("deny", "no-etc")),
        ("fs::read", {"args": {}}, ("deny", "no-etc")),
        ("fs::list", {"args": {}}, ("needs_approval", DEFAULT_RULE_ID)),
        ("web::get", {}, ("needs_approval", "ask-web")),
        ("web::post", {}, ("deny", "no-web-post")),
        ("fs::write", {"principal": "alice", "session_id": "prod-1"}, ("allow", "alice-writes")),
        ("fs::write", {"principal": "alice", "session_id": "dev-1"}, ("needs_approval", None)),
        ("fs::write", {"principal": "alice"}, ("needs_approval", DEFAULT_RULE_ID)),
        ("fs::write", {"principal": "bob", "session_id": "prod-1"}, ("needs_approval", None)),
        ("calc::pow", {"args": {"exponent": 3}}, ("allow", "small")),
        ("calc::pow", {"args": {"exponent": 30}}, ("needs_approval", DEFAULT_RULE_ID)),
        # a permit in error only fails to permit
        ("calc::pow", {"args": {"exponent": "3"}}, ("needs_approval", DEFAULT_RULE_ID)),
        ("strict::x", {"args": {"x": 1}}, ("allow", "policy7")),
        ("strict::x", {"args": {"x": None}}, ("deny", "lossless")),
        ("approval::resolve", {}, ("deny", PROTECTED_RULE_ID)),
    ],
)
def test_decisions(
    policies: CedarPolicies,
    function_id: str,
    fields: dict[str, Any],
    expected: tuple[str, str | None],
) -> None:
    decision, rule_id = check(policies, function_id, **fields)
    assert decision == expected[0]
    if expected[1] is not None:
        assert rule_id == expected[1]


def test_reasons_come_from_annotations(policies: CedarPolicies) -> None:
    reply = decide(policies, CheckRequest(function_id="web::get"), default="deny")
    assert reply.reason == "the web needs a human"
    broken = decide(
        policies, CheckRequest(function_id="fs::read", args={"path": 5}), default="allow"
    )
    assert "could not be evaluated" in broken.reason


def test_the_builtin_defaults_parse() -> None:
    defaults = parse_policies(builtin_text(), "<builtin>")
    assert check(defaults, "fs::read")[0] == "allow"
    assert check(defaults, "clock::now")[0] == "allow"
    assert check(defaults, "fs::write")[0] == "needs_approval"


def test_an_empty_file_has_no_policies() -> None:
    empty = parse_policies("// nothing yet\n", "p")
    assert empty.policies == {}
    assert check(empty, "fs::read") == ("needs_approval", DEFAULT_RULE_ID)


# -- rejected files ------------------------------------------------------------------------------

GOOD = 'permit (principal, action == Action::"call", resource);\n'


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        (GOOD + "\npermit (principal, action, resource) when { context.x == };\n", 3, "Cedar:"),
        (GOOD + "permit (principal, action, resource) when { foo(1) };\n", 2, "not a valid"),
        (GOOD + "permit (principal, action,\n", 2, "end of input"),
        (GOOD + 'permit (principal, action == Action::"cal", resource);\n', 2, "unknown action"),
        (GOOD + 'permit (principal, action, resource) when { action == Action::"run" };\n', 2,
         "unknown action"),
        (GOOD + 'permit (principal == User::"a", action, resource);\n', 2, "unknown entity type"),
        (GOOD + "permit (principal == ?principal, action, resource);\n", 2, "templates"),
        ('@id("a")\n' + GOOD + '@id("a")\n' + GOOD, 3, "two policies have @id('a')"),
        ('@id("builtin:x")\n' + GOOD, 1, "reserved"),
    ],
)  # fmt: skip
def test_a_bad_file_is_rejected_with_its_line(text: str, line: int, reason: str) -> None:
    with pytest.raises(PolicyFileError) as caught:
        parse_policies(text, "policies.cedar")
    assert caught.value.line == line, str(caught.value)
    assert reason in str(caught.value)
    assert str(caught.value).startswith(f"policies.cedar:{line}: ")
