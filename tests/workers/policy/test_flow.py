"""A rule's ``flow:`` block: its conditions, what a matching rule answers, and rejected blocks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tackroom.contracts.policy import DEFAULT_RULE_ID, CheckResponse
from tackroom.contracts.provenance import FlowFacts
from tackroom.kit.rulesfile import PolicyFileError
from tackroom.workers.policy.loader import parse_rules
from tackroom.workers.policy.rules import Ruleset, evaluate
from tests.workers.policy.test_worker import CHECK, serve

EXAMPLES = """\
schema_version: 1
rules:
  - id: no-send-after-web
    function: "tool::send_*"
    flow: {context: untrusted}
    decision: needs_approval
  - id: no-url-from-web
    function: http::fetch
    flow: {copied: {args: [url], from: untrusted}}
    decision: deny
    reason: a URL the web chose is not fetched
  - id: external-after-mail
    function: "*"
    flow: {side_effect: external, sources: ["mcp::mail::*"]}
    decision: needs_approval
  - id: rest
    function: "*"
    decision: allow
"""

WEB = FlowFacts(
    context_untrusted=True,
    untrusted_sources=["web::fetch"],
    args_from_untrusted={"url": ["web::fetch"]},
)
MAIL = FlowFacts(context_untrusted=True, untrusted_sources=["mcp::mail::inbox"])


def rule(flow: str, *, decision: str = "deny", then: str = "allow") -> Ruleset:
    """One ``flow:`` rule on ``f``, then a catch-all ``then`` rule."""
    return parse_rules(
        "schema_version: 1\nrules:\n"
        f"  - id: flowed\n    function: f\n    decision: {decision}\n    flow: {flow}\n"
        f"  - id: rest\n    function: '*'\n    decision: {then}\n",
        "permissions.yaml",
    )


def decided(ruleset: Ruleset, flow: FlowFacts | None, **args: Any) -> CheckResponse:
    return evaluate(ruleset, "f", args, default="needs_approval", flow=flow)


def rule_id(ruleset: Ruleset, flow: FlowFacts | None, **args: Any) -> str | None:
    return decided(ruleset, flow, **args).rule_id


# -- the examples of docs/workers/policy.md --------------------------------------------------------


def test_the_examples_decide_on_the_flow() -> None:
    rules = parse_rules(EXAMPLES, "permissions.yaml")
    sent = evaluate(rules, "tool::send_mail", {}, default="deny", flow=WEB)
    assert (sent.decision, sent.rule_id) == ("needs_approval", "no-send-after-web")
    assert sent.matched_constraint is not None
    assert sent.matched_constraint.model_dump() == {
        "arg": "flow.context",
        "op": "flow",
        "value": {"context": "untrusted"},
    }
    assert sent.reason == (
        "rule 'no-send-after-web': needs_approval"
        " (flow: the context held untrusted content from web::fetch)"
    )
    fetched = evaluate(rules, "http::fetch", {"url": "https://x.io"}, default="deny", flow=WEB)
    assert (fetched.decision, fetched.rule_id) == ("deny", "no-url-from-web")
    assert fetched.matched_constraint is not None
    assert fetched.matched_constraint.model_dump() == {
        "arg": "url",
        "op": "flow",
        "value": {"copied": {"args": ["url"], "from": "untrusted"}},
    }
    assert fetched.reason == (
        "a URL the web chose is not fetched"
        " (flow: url was copied from untrusted content (web::fetch))"
    )
    mailed = evaluate(rules, "tool::post", {}, default="deny", flow=MAIL)
    assert (mailed.decision, mailed.rule_id) == ("needs_approval", "external-after-mail")
    assert mailed.matched_constraint is not None
    assert mailed.matched_constraint.arg == "flow.sources"
    assert "mcp::mail::inbox" in mailed.reason
    inside = MAIL.model_copy(update={"side_effect": "internal"})
    assert evaluate(rules, "tool::post", {}, default="deny", flow=inside).rule_id == "rest"
    assert evaluate(rules, "tool::post", {}, default="deny", flow=WEB).rule_id == "rest"


def test_a_request_without_facts_matches_no_flow_rule() -> None:
    rules = parse_rules(EXAMPLES, "permissions.yaml")
    for function_id in ("tool::send_mail", "http::fetch", "tool::post"):
        assert evaluate(rules, function_id, {}, default="deny").rule_id == "rest"


def test_a_flow_conditioned_allow_never_allows_a_call_whose_flow_is_unknown() -> None:
    trusted = rule("{context: trusted}", decision="allow", then="deny")
    assert rule_id(trusted, FlowFacts()) == "flowed"
    assert rule_id(trusted, None) == "rest"
    assert rule_id(trusted, WEB) == "rest"
    quiet = rule("{side_effect: none}", decision="allow", then="needs_approval")
    assert rule_id(quiet, FlowFacts(side_effect="none")) == "flowed"
    assert rule_id(quiet, None) == "rest"
    alone = parse_rules(
        "schema_version: 1\nrules:\n  - id: a\n    function: f\n    decision: allow\n"
        "    flow: {context: trusted}\n",
        "p",
    )
    assert rule_id(alone, None) == DEFAULT_RULE_ID


# -- each condition --------------------------------------------------------------------------------


def test_side_effect_takes_one_or_a_list() -> None:
    ruleset = rule("{side_effect: [internal, external]}")
    assert rule_id(ruleset, FlowFacts(side_effect="internal")) == "flowed"
    assert rule_id(ruleset, FlowFacts(side_effect="external")) == "flowed"
    assert rule_id(ruleset, FlowFacts(side_effect="none")) == "rest"
    reply = decided(ruleset, FlowFacts(side_effect="external"))
    assert reply.matched_constraint is not None
    assert reply.matched_constraint.value == {"side_effect": ["internal", "external"]}


def test_sources_are_anchored_globs_of_the_untrusted_sources() -> None:
    ruleset = rule('{sources: ["mcp::mail::*", "file:inbox/*"]}')

    def source(*names: str) -> FlowFacts:
        return FlowFacts(context_untrusted=True, untrusted_sources=list(names))

    assert rule_id(ruleset, source("web::fetch", "mcp::mail::read")) == "flowed"
    assert rule_id(ruleset, source("file:inbox/a/b.eml")) == "flowed"
    assert rule_id(ruleset, source("xmcp::mail::read", "mcp::mailer::read")) == "rest"
    assert rule_id(ruleset, source("file:inbox")) == "rest"
    assert rule_id(ruleset, FlowFacts()) == "rest"
    assert rule_id(rule("{sources: web::fetch}"), source("web::fetch")) == "flowed"


@pytest.mark.parametrize(
    ("copied", "facts", "arg"),
    [
        ("{args: [url], from: untrusted}", {"args_from_untrusted": {"url": ["w"]}}, "url"),
        ("{args: [url, to], from: untrusted}", {"args_from_untrusted": {"to": ["w"]}}, "to"),
        ("{args: [url], from: untrusted}", {"args_from_untrusted": {"body": ["w"]}}, None),
        ("{args: [url], from: untrusted}", {"args_from_typed": {"url": ["q"]}}, None),
        ("{args: [url], from: typed}", {"args_from_typed": {"url": ["q"]}}, "url"),
        ("{args: [body], from: secret}", {"args_from_secret": {"body": ["s"]}}, "body"),
        ("{args: [body], from: secret}", {"args_from_untrusted": {"body": ["s"]}}, None),
        ("{args: [body], from: any}", {"args_from_secret": {"body": ["s"]}}, "body"),
        ("{args: [body], from: any}", {"args_from_typed": {"body": ["q"]}}, "body"),
        ("{from: untrusted}", {"args_from_untrusted": {"x": ["w"]}}, "x"),
        ('{args: "*", from: untrusted}', {"args_from_untrusted": {"x": ["w"]}}, "x"),
        (
            "{args: sinks, from: untrusted}",
            {"sinks": ["to"], "args_from_untrusted": {"to": ["w"]}},
            "to",
        ),
        (
            "{args: sinks, from: untrusted}",
            {"sinks": ["to"], "args_from_untrusted": {"body": ["w"]}},
            None,
        ),
        ("{args: [sinks], from: untrusted}", {"args_from_untrusted": {"sinks": ["w"]}}, "sinks"),
    ],
)
def test_copied_names_the_argument_it_found(
    copied: str, facts: dict[str, Any], arg: str | None
) -> None:
    reply = decided(rule(f"{{copied: {copied}}}"), FlowFacts.model_validate(facts))
    if arg is None:
        assert reply.rule_id == "rest"
        return
    assert reply.rule_id == "flowed"
    assert reply.matched_constraint is not None
    assert (reply.matched_constraint.arg, reply.matched_constraint.op) == (arg, "flow")


def test_every_condition_must_hold_with_the_glob_and_the_arguments() -> None:
    ruleset = parse_rules(
        "schema_version: 1\nrules:\n"
        "  - id: flowed\n    function: tool::*\n    decision: deny\n"
        "    args:\n      to: {matches: '.*@corp\\.example'}\n"
        "    flow: {context: untrusted, side_effect: external, copied: {args: [to], from: any}}\n"
        "  - id: rest\n    function: '*'\n    decision: allow\n",
        "permissions.yaml",
    )
    facts = FlowFacts(
        context_untrusted=True, side_effect="external", args_from_untrusted={"to": ["web::get"]}
    )
    to = {"to": "ceo@corp.example"}

    def check(function_id: str, args: dict[str, Any], flow: FlowFacts) -> str | None:
        return evaluate(ruleset, function_id, args, default="deny", flow=flow).rule_id

    assert check("tool::send", to, facts) == "flowed"
    assert check("web::send", to, facts) == "rest"
    assert check("tool::send", {"to": "a@b.example"}, facts) == "rest"
    assert check("tool::send", to, facts.model_copy(update={"context_untrusted": False})) == "rest"
    assert check("tool::send", to, facts.model_copy(update={"side_effect": "internal"})) == "rest"
    assert check("tool::send", to, facts.model_copy(update={"args_from_untrusted": {}})) == "rest"
    reply = evaluate(ruleset, "tool::send", to, default="deny", flow=facts)
    assert reply.matched_constraint is not None
    assert reply.matched_constraint.model_dump() == {
        "arg": "to",
        "op": "flow",
        "value": {"copied": {"args": ["to"], "from": "any"}},
    }


def test_a_needs_approval_flow_rule_keeps_its_approvers() -> None:
    ruleset = parse_rules(
        "schema_version: 1\nrules:\n  - id: a\n    function: f\n    decision: needs_approval\n"
        "    flow: {context: untrusted}\n    approvers: {roles: [admin]}\n",
        "p",
    )
    reply = decided(ruleset, WEB)
    assert reply.approvers is not None
    assert reply.approvers.roles == ("admin",)


# -- rejected blocks -------------------------------------------------------------------------------

RULE = "schema_version: 1\nrules:\n  - id: r\n    function: f\n    decision: deny\n"


@pytest.mark.parametrize(
    ("block", "line", "reason"),
    [
        ("    flow: {}\n", 6, "rules[0].flow: name context, side_effect, sources or copied"),
        ("    flow: untrusted\n", 6, "rules[0].flow: expected a mapping of flow conditions"),
        ("    flow: {contxt: untrusted}\n", 6, "flow.contxt: unknown key; did you mean 'context'"),
        ("    flow:\n      context: yes\n", 7, "unknown context 'yes'"),
        ("    flow: {context: true}\n", 6, "flow.context: expected a string, got a boolean"),
        ("    flow: {side_effect: extrenal}\n", 6, "did you mean 'external'"),
        ("    flow: {side_effect: []}\n", 6, "expected a side effect or a non-empty list"),
        ("    flow: {side_effect: [none, none]}\n", 6, "'none' is listed twice"),
        ("    flow: {sources: []}\n", 6, "flow.sources: expected a source glob"),
        ("    flow: {sources: ['a b']}\n", 6, "a name has no spaces"),
        ("    flow: {context: trusted, sources: [x]}\n", 6, "the rule would never apply"),
        ("    flow:\n      copied: {args: [url]}\n", 7, "flow.copied: missing 'from'"),
        ("    flow:\n      copied: {from: web}\n", 7, "unknown source 'web'"),
        ("    flow:\n      copied: {from: any, arg: [x]}\n", 7, "did you mean 'args'"),
        ("    flow:\n      copied: {from: any, args: url}\n", 7, "(one argument: [url])"),
        ("    flow:\n      copied: {from: any, args: []}\n", 7, "expected an argument name"),
        ("    flow:\n      copied: untrusted\n", 7, "flow.copied: expected a mapping with from"),
    ],
)
def test_a_bad_flow_block_is_rejected_with_its_line(block: str, line: int, reason: str) -> None:
    with pytest.raises(PolicyFileError) as caught:
        parse_rules(RULE + block, "permissions.yaml")
    assert caught.value.line == line, str(caught.value)
    assert reason in str(caught.value)


# -- on a bus --------------------------------------------------------------------------------------


async def test_the_file_decides_on_the_flow_after_the_builtin_flow_rules(tmp_path: Path) -> None:
    path = tmp_path / "permissions.yaml"
    path.write_text(EXAMPLES, encoding="utf-8")
    web = WEB.model_dump(mode="json")
    read = {"context_untrusted": True, "untrusted_sources": ["web::fetch"]}
    # Without the built-in untrusted-context rule, which would ask before the file's rule does.
    rules = ["secret-out", "untrusted-destination", "typed-destination", "untrusted-arguments"]
    async with serve(rules_path=str(path), reload_interval=0, flow_rules=rules) as bus:

        async def check(function_id: str, flow: dict[str, Any] | None) -> tuple[Any, Any]:
            payload: dict[str, Any] = {"function_id": function_id, "args": {}}
            if flow is not None:
                payload["flow"] = flow
            reply = await bus.trigger(CHECK, payload)
            return reply["decision"], reply["rule_id"]

        assert await check("tool::send_mail", read) == ("needs_approval", "no-send-after-web")
        assert await check("tool::send_mail", None) == ("allow", "rest")
        # The built-in untrusted-destination denies first, whatever the file says.
        assert await check("http::fetch", {**web, "sinks": ["url"]}) == (
            "deny",
            "builtin:flow:untrusted-destination",
        )
        assert await check("http::fetch", {**web, "side_effect": "none"}) == (
            "deny",
            "no-url-from-web",
        )
