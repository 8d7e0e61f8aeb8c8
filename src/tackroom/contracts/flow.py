"""The safe default flow rules every policy worker applies before its own rules.

Each rule reads only the call's :class:`~tackroom.contracts.provenance.FlowFacts` (what the gate
established, whatever the model says) and explains in its reason which flow triggered it. A
policy worker applies the rules named in its ``flow_rules`` setting (all of
:data:`DEFAULT_FLOW_RULES` unless configured); a rule file can add its own ``flow:`` conditions.

- ``secret-out`` (deny): a value copied from a secret reaches a tool with external effects.
- ``untrusted-destination`` (deny): a destination argument (a tool's ``sinks``: ``to``, ``url``,
  ``recipient``...) holds free text copied from untrusted content.
- ``typed-destination`` (needs approval): a destination taken from a value a quarantined reader
  typed out of untrusted content.
- ``untrusted-arguments`` (needs approval): a tool with external effects gets an argument
  copied from untrusted free text.
- ``untrusted-context`` (needs approval): any call of a tool with external effects once the
  context holds untrusted content. Copying is only what the harness can see; a model that read
  a page may paraphrase what it asks (a date written out, a hotel the page names), so a person
  confirms every external act from such a context. Turn it off (``flow_rules`` without it) only
  where nobody is there to ask and the other rules are enough.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Literal, get_args

from tackroom.contracts.policy import CheckResponse, MatchedConstraint
from tackroom.contracts.provenance import FlowFacts

__all__ = [
    "DEFAULT_FLOW_RULES",
    "FLOW_RULES",
    "FLOW_RULE_PREFIX",
    "FlowRule",
    "flow_verdict",
]

FlowRule = Literal[
    "secret-out",
    "untrusted-destination",
    "typed-destination",
    "untrusted-arguments",
    "untrusted-context",
]
FLOW_RULES: tuple[FlowRule, ...] = get_args(FlowRule)
DEFAULT_FLOW_RULES: tuple[FlowRule, ...] = FLOW_RULES
FLOW_RULE_PREFIX = "builtin:flow:"
"""A flow rule's ``rule_id`` is this prefix and its name: ``builtin:flow:secret-out``."""


def _names(origins: Iterable[str]) -> str:
    listed = list(dict.fromkeys(origins))
    return ", ".join(listed[:3]) + (f" and {len(listed) - 3} more" if len(listed) > 3 else "")


def _verdict(
    rule: FlowRule, decision: Literal["deny", "needs_approval"], arg: str | None, reason: str
) -> CheckResponse:
    constraint = None if arg is None else MatchedConstraint(arg=arg, op="flow", value=rule)
    return CheckResponse(
        decision=decision,
        rule_id=FLOW_RULE_PREFIX + rule,
        matched_constraint=constraint,
        reason=reason,
    )


def _secret_out(function_id: str, flow: FlowFacts) -> CheckResponse | None:
    if flow.side_effect != "external":
        return None
    for arg, origins in flow.args_from_secret.items():
        return _verdict(
            "secret-out",
            "deny",
            arg,
            f"{arg} holds a secret from {_names(origins)}, and {function_id} sends data out:"
            " a secret never leaves through a tool call",
        )
    return None


def _untrusted_destination(function_id: str, flow: FlowFacts) -> CheckResponse | None:
    for arg in flow.sinks:
        origins = flow.args_from_untrusted.get(arg)
        if origins:
            return _verdict(
                "untrusted-destination",
                "deny",
                arg,
                f"{arg} of {function_id} was copied from what {_names(origins)} returned, which"
                " nobody vouches for: a destination may not come from untrusted content (ask the"
                " user for it)",
            )
    return None


def _typed_destination(function_id: str, flow: FlowFacts) -> CheckResponse | None:
    for arg in flow.sinks:
        origins = flow.args_from_typed.get(arg)
        if origins:
            return _verdict(
                "typed-destination",
                "needs_approval",
                arg,
                f"{arg} of {function_id} was read out of untrusted content from"
                f" {_names(origins)}: a person confirms the destination",
            )
    return None


def _untrusted_arguments(function_id: str, flow: FlowFacts) -> CheckResponse | None:
    if flow.side_effect != "external":
        return None
    for arg, origins in flow.args_from_untrusted.items():
        return _verdict(
            "untrusted-arguments",
            "needs_approval",
            arg,
            f"{arg} of {function_id} was copied from what {_names(origins)} returned, which"
            f" nobody vouches for, and {function_id} acts outside: a person confirms it",
        )
    return None


def _untrusted_context(function_id: str, flow: FlowFacts) -> CheckResponse | None:
    if flow.side_effect != "external" or not flow.context_untrusted:
        return None
    return _verdict(
        "untrusted-context",
        "needs_approval",
        None,
        f"the model read untrusted content from {_names(flow.untrusted_sources)} before asking"
        f" for {function_id}, which acts outside: a person confirms it",
    )


_RULES: dict[FlowRule, Callable[[str, FlowFacts], CheckResponse | None]] = {
    "secret-out": _secret_out,
    "untrusted-destination": _untrusted_destination,
    "typed-destination": _typed_destination,
    "untrusted-arguments": _untrusted_arguments,
    "untrusted-context": _untrusted_context,
}


def flow_verdict(
    function_id: str,
    flow: FlowFacts | None,
    *,
    rules: Iterable[FlowRule] = DEFAULT_FLOW_RULES,
) -> CheckResponse | None:
    """The first of ``rules`` (in :data:`FLOW_RULES` order: denials first) that the call's flow
    triggers, or ``None``."""
    if flow is None:
        return None
    wanted = set(rules)
    for name in FLOW_RULES:
        if name in wanted:
            verdict = _RULES[name](function_id, flow)
            if verdict is not None:
                return verdict
    return None
