"""``context.flow``: the call's flow facts as Cedar sees them, and policies deciding on them."""

from __future__ import annotations

import cedarpy
import pytest

from tackroom.contracts.policy import CheckRequest, CheckResponse
from tackroom.contracts.provenance import FlowFacts
from tackroom.kit.rulesfile import PolicyFileError
from tackroom.workers.policy_cedar.mapping import cedar_requests, flow_context
from tackroom.workers.policy_cedar.policies import CedarPolicies, decide, parse_policies
from tackroom.workers.policy_cedar.worker import schema_text

# The YAML examples of docs/workers/policy.md (no-send-after-web, no-url-from-web,
# external-after-mail), in Cedar.
EXAMPLES = """\
@id("no-send-after-web")
permit (principal, action == Action::"call_with_approval", resource in Namespace::"tool")
when { resource.name like "send_*" && context.flow.known && context.flow.context_untrusted };

@id("no-send-after-web-unasked")
forbid (principal, action == Action::"call", resource in Namespace::"tool")
when { resource.name like "send_*" && context.flow.known && context.flow.context_untrusted };

@id("no-url-from-web")
@reason("a URL the web chose is not fetched")
forbid (
  principal,
  action in [Action::"call", Action::"call_with_approval"],
  resource == Function::"http::fetch"
)
when { context.flow.copied_untrusted.contains("url") };

@id("external-after-mail")
forbid (principal, action == Action::"call", resource)
when { context.flow.side_effect == "external" &&
       context.flow.untrusted_namespaces.contains("mcp::mail") };

@id("external-after-mail-ask")
permit (principal, action == Action::"call_with_approval", resource)
when { context.flow.side_effect == "external" &&
       context.flow.untrusted_namespaces.contains("mcp::mail") };

@id("rest")
permit (principal, action == Action::"call", resource);
"""

WEB = FlowFacts(
    context_untrusted=True,
    untrusted_sources=["web::fetch"],
    args_from_untrusted={"url": ["web::fetch"]},
)
MAIL = FlowFacts(context_untrusted=True, untrusted_sources=["mcp::mail::inbox"])


def schema() -> cedarpy.Schema:
    return cedarpy.Schema.from_str(schema_text())


def policies(text: str = EXAMPLES) -> CedarPolicies:
    return parse_policies(text, "policies.cedar", schema=schema())


def decided(function_id: str, flow: FlowFacts | None, text: str = EXAMPLES) -> CheckResponse:
    request = CheckRequest(function_id=function_id, args={"x": 1}, flow=flow)
    return decide(policies(text), request, default="needs_approval")


def test_without_facts_every_attribute_is_there_and_known_is_false() -> None:
    assert flow_context(None) == {
        "known": False,
        "context_untrusted": False,
        "untrusted_sources": [],
        "untrusted_namespaces": [],
        "side_effect": "",
        "sinks": [],
        "copied_untrusted": [],
        "copied_typed": [],
        "copied_secret": [],
    }
    call, ask = cedar_requests(CheckRequest(function_id="f"))
    assert call["context"]["flow"] == ask["context"]["flow"] == flow_context(None)


def test_the_facts_become_booleans_strings_and_sets_of_names() -> None:
    facts = FlowFacts(
        context_untrusted=True,
        untrusted_sources=["mcp::mail::inbox", "file:inbox/a.eml", "web::fetch"],
        side_effect="internal",
        sinks=["to", "url"],
        args_from_untrusted={"body": ["web::fetch"], "url": ["web::fetch"]},
        args_from_typed={"to": ["quarantine::extract"]},
        args_from_secret={"token": ["auth::x"]},
    )
    assert flow_context(facts) == {
        "known": True,
        "context_untrusted": True,
        "untrusted_sources": ["mcp::mail::inbox", "file:inbox/a.eml", "web::fetch"],
        "untrusted_namespaces": ["mcp", "mcp::mail", "web"],
        "side_effect": "internal",
        "sinks": ["to", "url"],
        "copied_untrusted": ["body", "url"],
        "copied_typed": ["to"],
        "copied_secret": ["token"],
    }
    request = CheckRequest(function_id="f", flow=facts)
    assert cedar_requests(request)[0]["context"]["flow"] == flow_context(facts)


def test_the_documented_examples_decide_on_the_flow() -> None:
    context_only = FlowFacts(context_untrusted=True, untrusted_sources=["web::fetch"])
    sent = decided("tool::send_mail", context_only)
    assert (sent.decision, sent.rule_id) == ("needs_approval", "no-send-after-web")
    assert decided("tool::send_mail", None).decision == "allow"
    assert decided("tool::send_mail", FlowFacts()).decision == "allow"
    fetched = decided("http::fetch", WEB)
    assert (fetched.decision, fetched.rule_id) == ("deny", "no-url-from-web")
    assert fetched.reason == "a URL the web chose is not fetched"
    assert decided("http::fetch", None).decision == "allow"
    mailed = decided("tool::post", MAIL)
    assert (mailed.decision, mailed.rule_id) == ("needs_approval", "external-after-mail-ask")
    inside = MAIL.model_copy(update={"side_effect": "internal"})
    assert decided("tool::post", inside).decision == "allow"


def test_a_policy_reads_the_flow_without_has_even_when_the_request_has_no_facts() -> None:
    # Were an attribute missing, this forbid would be in error and deny (fail closed).
    text = """\
@id("no-secrets")
forbid (principal, action in [Action::"call", Action::"call_with_approval"], resource)
when { context.flow.copied_secret.contains("body") || context.flow.sinks.contains("to") ||
       context.flow.side_effect == "none" || context.flow.untrusted_sources.contains("x") };

@id("rest")
permit (principal, action == Action::"call", resource);
"""
    reply = decided("tool::send", None, text)
    assert (reply.decision, reply.rule_id) == ("allow", "rest")
    secret = FlowFacts(args_from_secret={"body": ["auth::x"]})
    assert decided("tool::send", secret, text).rule_id == "no-secrets"


def test_known_tells_a_call_without_facts_apart() -> None:
    text = """\
@id("unknown-flow-asks")
forbid (principal, action == Action::"call", resource) when { !context.flow.known };

@id("rest")
permit (principal, action, resource);
"""
    assert decided("tool::send", None, text).decision == "needs_approval"
    assert decided("tool::send", FlowFacts(), text).decision == "allow"


def test_the_schema_knows_the_flow_attributes() -> None:
    with pytest.raises(PolicyFileError, match="context_untrustd"):
        policies(
            "@id('typo')\nforbid (principal, action == Action::'call', resource)\n"
            "when { context.flow.context_untrustd };\n".replace("'", '"')
        )
    policies(
        '@id("all")\nforbid (principal, action == Action::"call", resource)\n'
        "when { context.flow.known && context.flow.context_untrusted &&"
        ' context.flow.side_effect == "external" && context.flow.sinks.contains("to") &&'
        " context.flow.copied_untrusted.containsAny(context.flow.sinks) &&"
        " context.flow.copied_typed.isEmpty() && context.flow.copied_secret.isEmpty() &&"
        ' context.flow.untrusted_sources.contains("web::fetch") &&'
        ' context.flow.untrusted_namespaces.contains("web") };\n'
    )
