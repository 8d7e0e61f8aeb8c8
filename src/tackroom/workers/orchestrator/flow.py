"""What the context a model read held, and what its calls copied from it (flow facts).

The gate asks :class:`FlowIndex` for each call's :class:`~tackroom.contracts.provenance.FlowFacts`
before the policy decides. The index keeps, beside each session's cached path
(:class:`~.transcript.PathView`), the labelled content of the path — the untrusted, typed and
secret texts with their origins, and the text the user, the system and trusted tools wrote —
grown in place as the path grows, so a call costs a few substring searches, not a re-read.
A label a tool result carries is also where its result's label is decided (:func:`result_label`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tackroom.contracts.messages import (
    AgentMessage,
    AssistantMessage,
    FunctionResultMessage,
    text_of,
)
from tackroom.contracts.provenance import (
    LABEL_KEY,
    FlowFacts,
    Label,
    TextPool,
    argument_leaves,
    copied_from,
    joined,
    normalized,
    untrusted_label,
)
from tackroom.contracts.tools import ToolTraits
from tackroom.workers.orchestrator.clipping import result_text
from tackroom.workers.orchestrator.transcript import PathView, SessionsClient

__all__ = ["ContextFlow", "FlowIndex", "result_label", "returned_label"]


@dataclass(slots=True)
class ContextFlow:
    """The labelled content of a session's path up to ``length`` messages of view
    ``generation``."""

    generation: int
    length: int = 0
    untrusted: TextPool = field(default_factory=TextPool)
    typed: TextPool = field(default_factory=TextPool)
    secret: TextPool = field(default_factory=TextPool)
    trusted: TextPool = field(default_factory=TextPool)
    labels: list[Label] = field(default_factory=list)
    _label: tuple[int, Label | None] = (0, None)
    """The context's label, as of how many labels it was joined from."""
    _system: tuple[str, str] | None = None
    """The run's system prompt and its normalized text, as last asked."""

    def extend(self, messages: list[AgentMessage]) -> None:
        for message in messages[self.length :]:
            self._add(message)
        self.length = len(messages)

    def _add(self, message: AgentMessage) -> None:
        if isinstance(message, AssistantMessage):
            return
        text = normalized(_text(message))
        label = message.label
        if label is None:
            self.trusted.add(message.role, text)
            return
        self.labels.append(label)
        origin = ", ".join(label.origins) or _origin(message)
        if label.secret:
            self.secret.add(origin, text)
        if label.untrusted:
            (self.typed if label.typed else self.untrusted).add(origin, text)
        elif not label.secret:
            self.trusted.add(origin, text)

    @property
    def label(self) -> Label | None:
        """The context's label: untrusted once any entry is (``None``: nothing to watch)."""
        if self._label[0] != len(self.labels):
            self._label = (len(self.labels), joined(self.labels))
        return self._label[1]

    def _trusted(self, system: str) -> tuple[TextPool, str]:
        """The trusted texts, and ``system`` (the run's prompt) normalized once."""
        if self._system is None or self._system[0] != system:
            self._system = (system, normalized(system))
        return self.trusted, self._system[1]

    def facts(
        self,
        arguments: Mapping[str, Any],
        traits: ToolTraits,
        *,
        system: str,
        hidden: bool = False,
    ) -> FlowFacts:
        """The call's flow facts. With ``hidden`` (planned mode) the model never read the
        untrusted free text, only handles to it: nothing can have been copied from it."""
        label = self.label
        if label is None:
            return FlowFacts.model_construct(side_effect=traits.effect, sinks=list(traits.sinks))
        trusted = self._trusted(system)
        sinks = traits.sinks
        leaves = argument_leaves(arguments)
        free = (
            {}
            if hidden
            else copied_from(leaves, self.untrusted, trusted=trusted, destinations=sinks)
        )
        typed = copied_from(leaves, self.typed, trusted=trusted, destinations=sinks)
        return FlowFacts.model_construct(
            context_untrusted=label.untrusted,
            untrusted_sources=list(label.origins) if label.untrusted else [],
            side_effect=traits.effect,
            sinks=list(traits.sinks),
            args_from_untrusted=free,
            args_from_typed={name: origins for name, origins in typed.items() if name not in free},
            args_from_secret=copied_from(leaves, self.secret, inside=True),
        )


def _text(message: AgentMessage) -> str:
    if isinstance(message, FunctionResultMessage):
        return result_text(message)
    return text_of(message.content)


def _origin(message: AgentMessage) -> str:
    return message.function_id if isinstance(message, FunctionResultMessage) else message.role


class FlowIndex:
    """Each active session's :class:`ContextFlow`, kept beside the sessions client's path."""

    def __init__(self, sessions: SessionsClient) -> None:
        self._sessions = sessions
        self._flows: dict[str, ContextFlow] = {}

    async def context(self, session_id: str) -> ContextFlow:
        """The flow of the session's active path as it is now."""
        return self.of(session_id, await self._sessions.view(session_id))

    def of(self, session_id: str, view: PathView) -> ContextFlow:
        flow = self._flows.get(session_id)
        if flow is None or flow.generation != view.generation or flow.length > len(view.messages):
            flow = ContextFlow(generation=view.generation)
            self._flows[session_id] = flow
            if len(self._flows) > 1024:
                self._flows.pop(next(iter(self._flows)))
        flow.extend(view.messages)
        return flow


def returned_label(value: Any) -> tuple[Any, Label | None]:
    """A tool's reply without its ``_label`` key, and the label it carried (``None``: none, or
    one that does not read as a label — the tool's traits decide then)."""
    if not isinstance(value, dict) or LABEL_KEY not in value:
        return value, None
    rest = {key: item for key, item in value.items() if key != LABEL_KEY}
    raw = value[LABEL_KEY]
    try:
        return rest, Label.model_validate(raw)
    except ValueError:
        return rest, untrusted_label("unreadable label")


def result_label(function_id: str, traits: ToolTraits, *labels: Label | None) -> Label | None:
    """A result's label: untrusted when its tool declares ``untrusted_output`` or any of
    ``labels`` (the tool's own, a hook's) is; a tool never makes its result more trusted."""
    declared = untrusted_label(function_id) if traits.untrusted_output else None
    return joined([declared, *labels])
