"""A rule's ``flow:`` block in ``permissions.yaml`` → :class:`~.flow.FlowBlock`, with lines.

```yaml
flow:                           # optional; at least one condition when given
  context: untrusted            # untrusted | trusted
  side_effect: [internal, external]   # none | internal | external: one, or a list
  sources: ["mcp::mail::*"]     # a glob or a list of globs of the untrusted sources
  copied:                       # an argument copied from untrusted content...
    args: [url]                 #   a list of argument names, "sinks" or "*" (the default)
    from: untrusted             #   required: untrusted | typed | secret | any
```

The loader (:mod:`tackroom.workers.policy.loader`) hands in its node walker, which knows the
file's name and turns a problem into ``PolicyFileError`` at the node's line.
"""

from __future__ import annotations

from typing import TypeVar

import yaml

from tackroom.contracts.provenance import SIDE_EFFECTS, SideEffect
from tackroom.kit.rulesfile import suggest
from tackroom.workers.policy.accessfile import Nodes
from tackroom.workers.policy.flow import (
    ANY_ARG,
    COPIED_FROM,
    FLOW_KEYS,
    SINKS,
    TRUSTS,
    Copied,
    FlowBlock,
)

__all__ = ["COPIED_KEYS", "parse_flow"]

COPIED_KEYS = ("args", "from")

N = TypeVar("N", bound=str)


def parse_flow(nodes: Nodes, node: yaml.Node, field: str) -> FlowBlock:
    """``flow: {context?, side_effect?, sources?, copied?}``: at least one of them."""
    found = nodes.entries(
        node,
        field,
        "a mapping of flow conditions (context, side_effect, sources, copied)",
        known=FLOW_KEYS,
        required=(),
    )
    if not found:
        nodes.fail(node, field, "name context, side_effect, sources or copied")
    context = None
    if "context" in found:
        context = _choice(nodes, found["context"], f"{field}.context", TRUSTS, "context")
    sources: tuple[str, ...] = ()
    if "sources" in found:
        sources = tuple(_names(nodes, found["sources"], f"{field}.sources", "a source glob"))
        if context == "trusted":
            nodes.fail(
                found["sources"],
                f"{field}.sources",
                "sources are where untrusted content came from: with context: trusted the rule"
                " would never apply",
            )
    return FlowBlock(
        context=context,
        side_effects=(
            _side_effects(nodes, found["side_effect"], f"{field}.side_effect")
            if "side_effect" in found
            else ()
        ),
        sources=sources,
        copied=_copied(nodes, found["copied"], f"{field}.copied") if "copied" in found else None,
    )


def _choice(nodes: Nodes, node: yaml.Node, field: str, known: tuple[N, ...], what: str) -> N:
    name = nodes.string(node, field)
    match = next((choice for choice in known if choice == name), None)
    if match is None:
        nodes.fail(node, field, f"unknown {what} {name!r}" + suggest(name, known))
    return match


def _names(nodes: Nodes, node: yaml.Node, field: str, what: str) -> list[str]:
    """A name, or a non-empty list of names (no spaces in one, no repeats)."""
    items = node.value if isinstance(node, yaml.SequenceNode) else [node]
    if not items:
        nodes.fail(node, field, f"expected {what} or a non-empty list of them")
    names: list[str] = []
    for item in items:
        name = nodes.string(item, field)
        if any(char.isspace() for char in name):
            nodes.fail(item, field, f"a name has no spaces: {name!r}")
        if name in names:
            nodes.fail(item, field, f"{name!r} is listed twice")
        names.append(name)
    return names


def _side_effects(nodes: Nodes, node: yaml.Node, field: str) -> tuple[SideEffect, ...]:
    items = node.value if isinstance(node, yaml.SequenceNode) else [node]
    if not items:
        nodes.fail(node, field, "expected a side effect or a non-empty list of them")
    chosen: list[SideEffect] = []
    for item in items:
        effect = _choice(nodes, item, field, SIDE_EFFECTS, "side effect")
        if effect in chosen:
            nodes.fail(item, field, f"{effect!r} is listed twice")
        chosen.append(effect)
    return tuple(chosen)


def _copied(nodes: Nodes, node: yaml.Node, field: str) -> Copied:
    found = nodes.entries(
        node, field, "a mapping with from (and args)", known=COPIED_KEYS, required=("from",)
    )
    source = _choice(nodes, found["from"], f"{field}.from", COPIED_FROM, "source")
    if "args" not in found:
        return Copied(args=ANY_ARG, source=source)
    args_node = found["args"]
    where = f"{field}.args"
    if isinstance(args_node, yaml.SequenceNode):
        names = tuple(_names(nodes, args_node, where, "an argument name"))
        return Copied(args=names, source=source)
    selector = nodes.string(args_node, where)
    if selector not in (SINKS, ANY_ARG):
        nodes.fail(
            args_node,
            where,
            f"expected a list of argument names, 'sinks' or '*', got {selector!r}"
            f" (one argument: [{selector}])",
        )
    return Copied(args=SINKS if selector == SINKS else ANY_ARG, source=source)
