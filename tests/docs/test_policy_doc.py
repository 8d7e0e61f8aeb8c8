"""docs/workers/policy.md: its rule files and configs load as written, and the flow rules
section's YAML and Cedar examples decide alike."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

import cedarpy
import pytest
import yaml

from tackroom.contracts.policy import CheckRequest
from tackroom.contracts.provenance import FlowFacts
from tackroom.kit.rulesfile import PolicyFileError
from tackroom.workers.policy.loader import parse_rules
from tackroom.workers.policy.rules import evaluate
from tackroom.workers.policy.worker import PolicyConfig
from tackroom.workers.policy_cedar.access import parse_access
from tackroom.workers.policy_cedar.policies import decide, parse_policies
from tackroom.workers.policy_cedar.worker import CedarPolicyConfig, schema_text

DOC = (Path(__file__).resolve().parents[2] / "docs" / "workers" / "policy.md").read_text()
FLOW = "## Flow rules (prompt injection)"


def section(heading: str) -> str:
    """From ``heading`` to the next heading of its level or above."""
    start = DOC.index(heading + "\n") + len(heading)
    level = len(heading.split(" ")[0])
    end = re.compile(rf"^#{{1,{level}}} ", re.M).search(DOC, start)
    return DOC[start : end.start() if end else len(DOC)]


def blocks(text: str, language: str) -> list[str]:
    """The fenced blocks of ``language`` (``""``: a bare fence) in ``text``."""
    found: list[str] = []
    lines: list[str] | None = None
    fence = ""
    for line in text.splitlines(keepends=True):
        if lines is None and line.startswith("```"):
            fence, lines = line[3:].strip(), []
        elif lines is not None and line.rstrip() == "```":
            if fence == language:
                found.append("".join(lines))
            lines = None
        elif lines is not None:
            lines.append(line)
    return found


def rule_files() -> list[str]:
    return [
        b for b in blocks(DOC, "yaml") if b.startswith("schema_version: 1") and "[...]" not in b
    ]


@pytest.mark.parametrize("text", rule_files())
def test_every_whole_rules_file_loads(text: str) -> None:
    parse_rules(text, "permissions.yaml")


@pytest.mark.parametrize("text", blocks(DOC, "cedar"))
def test_every_cedar_example_loads(text: str) -> None:
    schema = cedarpy.Schema.from_str(schema_text())
    try:
        parse_policies(text, "policies.cedar", schema=schema)
    except PolicyFileError:
        parse_access(text, "access.cedar", schema=schema)


@pytest.mark.parametrize("text", [b for b in blocks(DOC, "yaml") if "worker_config:" in b])
def test_every_worker_config_is_valid(text: str) -> None:
    sections = yaml.safe_load(text)["worker_config"]
    models: dict[str, type[PolicyConfig] | type[CedarPolicyConfig]] = {
        "policy": PolicyConfig,
        "policy-cedar": CedarPolicyConfig,
    }
    assert sections, text
    checked = [models[name].model_validate(sections[name]) for name in sections if name in models]
    assert checked, text


# -- the flow rules section ------------------------------------------------------------------------


def flow_yaml() -> str:
    (text,) = [b for b in blocks(section(FLOW), "yaml") if b.startswith("schema_version")]
    return text


def test_the_flow_config_leaves_out_only_the_context_rule() -> None:
    (config,) = [b for b in blocks(section(FLOW), "yaml") if "worker_config:" in b]
    rules = yaml.safe_load(config)["worker_config"]["policy"]["flow_rules"]
    shown = PolicyConfig.model_validate({"flow_rules": rules}).flow_rules
    assert [*shown, "untrusted-context"] == PolicyConfig().flow_rules


def test_the_flow_errors_are_the_loaders() -> None:
    (shown,) = [b for b in blocks(section(FLOW), "") if "rules[0].flow" in b]
    made = []
    for old, new in (("{context: untrusted}", "{contxt: untrusted}"), ("untrusted}}", "web}}")):
        with pytest.raises(PolicyFileError) as caught:
            parse_rules(flow_yaml().replace(old, new, 1), "permissions.yaml")
        made.append(str(caught.value))
    assert shown.splitlines() == made


def test_the_flow_answer_is_the_workers() -> None:
    (shown,) = blocks(section(FLOW), "json")
    facts = FlowFacts(
        context_untrusted=True,
        untrusted_sources=["web::fetch"],
        args_from_untrusted={"url": ["web::fetch"]},
    )
    reply = evaluate(
        parse_rules(flow_yaml(), "permissions.yaml"),
        "http::fetch",
        {"url": "https://evil.example"},
        default="needs_approval",
        flow=facts,
    )
    assert reply.model_dump(exclude={"schema_version", "approvers"}) == json.loads(shown)


FACTS: list[FlowFacts | None] = [
    None,
    FlowFacts(),
    FlowFacts(side_effect="none"),
    FlowFacts(side_effect="internal"),
    FlowFacts(context_untrusted=True, untrusted_sources=["web::fetch"]),
    FlowFacts(context_untrusted=True, untrusted_sources=["web::fetch"], side_effect="none"),
    FlowFacts(
        context_untrusted=True,
        untrusted_sources=["web::fetch"],
        args_from_untrusted={"url": ["web::fetch"]},
    ),
    FlowFacts(context_untrusted=True, untrusted_sources=["mcp::mail::read"]),
    FlowFacts(context_untrusted=True, untrusted_sources=["mcp::mail::read"], side_effect="none"),
    FlowFacts(
        context_untrusted=True,
        untrusted_sources=["mcp::mailer::read"],
        args_from_untrusted={"url": ["mcp::mailer::read"]},
    ),
    FlowFacts(args_from_typed={"url": ["quarantine::extract"]}, side_effect="none"),
]
FUNCTIONS = ["tool::send_mail", "tool::sender", "http::fetch", "fs::read", "mcp::mail::send"]


def test_the_yaml_and_cedar_flow_examples_decide_alike() -> None:
    text = section(FLOW)
    rules = parse_rules(flow_yaml(), "permissions.yaml")
    (cedar,) = blocks(text, "cedar")
    policies = parse_policies(
        cedar, "policies.cedar", schema=cedarpy.Schema.from_str(schema_text())
    )
    seen: set[str] = set()
    for function_id, facts in itertools.product(FUNCTIONS, FACTS):
        args: dict[str, Any] = {"url": "https://x.example"}
        by_yaml = evaluate(rules, function_id, args, default="needs_approval", flow=facts)
        request = CheckRequest(function_id=function_id, args=args, flow=facts)
        by_cedar = decide(policies, request, default="needs_approval")
        assert by_yaml.decision == by_cedar.decision, (function_id, facts, by_yaml, by_cedar)
        seen.add(f"{by_yaml.decision}:{by_yaml.rule_id}")
    assert seen >= {
        "needs_approval:no-send-after-web",
        "deny:no-url-from-web",
        "needs_approval:external-after-mail",
        "allow:quiet-reads",
        "needs_approval:builtin:default",
    }
