"""A rule's ``flow:`` block: conditions on the call's data flow (pure).

```yaml
flow:
  context: untrusted                     # untrusted | trusted: did the model's context hold
                                         #   untrusted content?
  side_effect: external                  # none | internal | external, or a list of them
  sources: ["mcp::mail::*"]              # globs: the untrusted content came from one of them
  copied: {args: [url], from: untrusted} # an argument copied from untrusted | typed | secret |
                                         #   any content; args: a list, "sinks" or "*"
```

Every condition given must hold (AND, with the rule's glob and argument constraints), on the
:class:`~tackroom.contracts.provenance.FlowFacts` the gate sent. A request without facts matches
no rule with a ``flow:`` block: a flow-conditioned ``allow`` never allows a call whose flow is
unknown (and a flow-conditioned ``deny`` is dodged the same way, as a constrained deny is by a
missing argument: keep a broad rule without ``flow:`` after it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, get_args

from tackroom.contracts.policy import MatchedConstraint, function_glob
from tackroom.contracts.provenance import FlowFacts, SideEffect

__all__ = [
    "ANY_ARG",
    "COPIED_FROM",
    "FLOW_KEYS",
    "SINKS",
    "TRUSTS",
    "Copied",
    "CopiedFrom",
    "FlowBlock",
    "FlowMatch",
    "Trust",
]

Trust = Literal["untrusted", "trusted"]
TRUSTS: tuple[Trust, ...] = get_args(Trust)
CopiedFrom = Literal["untrusted", "typed", "secret", "any"]
COPIED_FROM: tuple[CopiedFrom, ...] = get_args(CopiedFrom)
FLOW_KEYS = ("context", "side_effect", "sources", "copied")
SINKS: Final = "sinks"
"""``copied.args: sinks``: the tool's destination arguments (``to``, ``url``...)."""
ANY_ARG: Final = "*"

_COPIED_WORDS: dict[CopiedFrom, str] = {
    "untrusted": "untrusted content",
    "typed": "values a quarantined reader typed out of untrusted content",
    "secret": "a secret",
    "any": "untrusted or secret content",
}


def _names(origins: Iterable[str]) -> str:
    listed = list(dict.fromkeys(origins))
    if not listed:
        return "an unnamed source"
    return ", ".join(listed[:3]) + (f" and {len(listed) - 3} more" if len(listed) > 3 else "")


@dataclass(frozen=True, slots=True)
class FlowMatch:
    """The condition a matching ``flow:`` block is named by, and the flow in words."""

    arg: str
    """The copied argument, or ``flow.<condition>`` for a condition on no argument."""
    key: str
    written: Any
    why: str

    def describe(self) -> MatchedConstraint:
        return MatchedConstraint(arg=self.arg, op="flow", value={self.key: self.written})


@dataclass(frozen=True, slots=True)
class Copied:
    """``copied: {args, from}``: one of ``args`` holds a value copied from ``source``."""

    args: tuple[str, ...] | Literal["sinks", "*"]
    source: CopiedFrom

    def written(self) -> dict[str, Any]:
        args = self.args if isinstance(self.args, str) else list(self.args)
        return {"args": args, "from": self.source}

    def copies(self, flow: FlowFacts) -> dict[str, list[str]]:
        """The arguments copied from ``source``, with their origins."""
        chosen: dict[CopiedFrom, Mapping[str, list[str]]] = {
            "untrusted": flow.args_from_untrusted,
            "typed": flow.args_from_typed,
            "secret": flow.args_from_secret,
        }
        merged: dict[str, list[str]] = {}
        for name, copies in chosen.items():
            if self.source in (name, "any"):
                for arg, origins in copies.items():
                    merged.setdefault(arg, []).extend(origins)
        return merged

    def found(self, flow: FlowFacts) -> tuple[str, list[str]] | None:
        """The first selected argument that was copied, with its origins."""
        copies = self.copies(flow)
        if self.args == SINKS:
            candidates: Iterable[str] = flow.sinks
        elif self.args == ANY_ARG:
            candidates = copies
        else:
            candidates = self.args
        return next(((arg, copies[arg]) for arg in candidates if arg in copies), None)


@dataclass(frozen=True, slots=True)
class FlowBlock:
    """A rule's ``flow:`` conditions; at least one is set (the loader sees to it)."""

    context: Trust | None = None
    side_effects: tuple[SideEffect, ...] = ()
    sources: tuple[str, ...] = ()
    copied: Copied | None = None

    def match(self, flow: FlowFacts | None) -> FlowMatch | None:
        """When every condition holds on ``flow``: the most specific one (``copied``, then
        ``sources``, ``context``, ``side_effect``); ``None`` otherwise, and always without
        facts."""
        if flow is None:
            return None
        found = [check(flow) for check in self._checks()]
        if not found or any(match is None for match in found):
            return None
        return found[0]

    def _checks(self) -> Iterator[Callable[[FlowFacts], FlowMatch | None]]:
        if self.copied is not None:
            yield self._copied
        if self.sources:
            yield self._sources
        if self.context is not None:
            yield self._context
        if self.side_effects:
            yield self._side_effect

    def _copied(self, flow: FlowFacts) -> FlowMatch | None:
        assert self.copied is not None
        found = self.copied.found(flow)
        if found is None:
            return None
        arg, origins = found
        why = f"{arg} was copied from {_COPIED_WORDS[self.copied.source]} ({_names(origins)})"
        return FlowMatch(arg, "copied", self.copied.written(), why)

    def _sources(self, flow: FlowFacts) -> FlowMatch | None:
        globs = [function_glob(pattern) for pattern in self.sources]
        hits = [s for s in flow.untrusted_sources if any(g.fullmatch(s) for g in globs)]
        if not hits:
            return None
        why = f"the context held untrusted content from {_names(hits)}"
        return FlowMatch("flow.sources", "sources", list(self.sources), why)

    def _context(self, flow: FlowFacts) -> FlowMatch | None:
        if flow.context_untrusted != (self.context == "untrusted"):
            return None
        why = (
            f"the context held untrusted content from {_names(flow.untrusted_sources)}"
            if flow.context_untrusted
            else "the context held no untrusted content"
        )
        return FlowMatch("flow.context", "context", self.context, why)

    def _side_effect(self, flow: FlowFacts) -> FlowMatch | None:
        if flow.side_effect not in self.side_effects:
            return None
        why = f"the tool's side effect is {flow.side_effect}"
        return FlowMatch("flow.side_effect", "side_effect", list(self.side_effects), why)
