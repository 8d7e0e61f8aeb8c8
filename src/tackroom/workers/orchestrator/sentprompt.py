"""What each model call was sent, recorded by reference (:mod:`tackroom.contracts.modelprompts`).

The context assembler knows where each message it assembles comes from (a position on the
session's path; read as stored, or rendered: clipped, a summary, a rule as user text). The model
call says what it finally sent (after hooks, the model chain, structured output, tools in text).
:class:`PromptRecorder` turns the two into a :class:`SentPrompt`: the sent messages matched to
the assembled ones in order — by identity when nothing changed them, else by equality, so a
message a hook rewrote is found and kept by its digest while the rest stay references — runs of
entries compressed to ``first`` … ``last``, and each part the session has not stored yet written
once to :data:`PROMPTS_SCOPE`. With nothing changed, a call costs a pass over its message list
and no write (the system prompt and tools of a run are written on its first call).
"""

from __future__ import annotations

import bisect
import logging
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from tackroom.contracts.messages import AgentMessage
from tackroom.contracts.modelprompts import (
    PROMPTS_SCOPE,
    MessageBlob,
    PromptBlob,
    SentBlob,
    SentEntries,
    SentPrompt,
    SentRef,
    SystemBlob,
    ToolsBlob,
    blob_key,
    digest_of,
)
from tackroom.contracts.provider import ProviderRequest, ToolSpec
from tackroom.engine.errors import InvalidPayload
from tackroom.engine.protocol import StateBackend

__all__ = ["Origins", "PathSources", "PromptRecorder", "Sent"]

_log = logging.getLogger("tackroom.orchestrator")
_KNOWN = 8192


@dataclass(slots=True)
class PathSources:
    """Per entry of a cached path view: its id; which positions the model reads rendered (not
    as the session stores them), in order, and their digests, each computed once."""

    ids: list[str] = field(default_factory=list)
    rendered_at: list[int] = field(default_factory=list)
    rendered: set[int] = field(default_factory=set)
    digests: dict[int, str] = field(default_factory=dict)

    def add(self, entry_id: str, *, rendered: bool) -> None:
        if rendered:
            self.rendered_at.append(len(self.ids))
            self.rendered.add(len(self.ids))
        self.ids.append(entry_id)

    def digest(self, position: int, message: AgentMessage) -> str:
        known = self.digests.get(position)
        if known is None:
            known = self.digests[position] = message_digest(message)
        return known


@dataclass(frozen=True, slots=True)
class Origins:
    """Where the assembled messages come from: ranges of path positions, in the order sent."""

    sources: PathSources
    segments: list[range]

    def positions(self) -> list[int]:
        return [position for segment in self.segments for position in segment]


@dataclass(slots=True)
class Sent:
    """What a model call finally sent: filled in by the call before each try, so the try that
    answered is what stays."""

    request: ProviderRequest | None = None
    """The request with the hooks' changes, the model tried and its output format — its
    messages before any rendering in text."""
    system_prompt: str = ""
    tool_calling: Literal["native", "text"] = "native"
    appended: list[AgentMessage] = field(default_factory=list)
    run_tools: object | None = None
    """The run's tool list when no hook replaced the request: its digest is cached."""

    def sending(
        self,
        request: ProviderRequest,
        *,
        system_prompt: str,
        tool_calling: Literal["native", "text"] = "native",
        appended: Sequence[AgentMessage] = (),
    ) -> None:
        self.request = request
        self.system_prompt = system_prompt
        self.tool_calling = tool_calling
        self.appended = list(appended)


def message_digest(message: AgentMessage) -> str:
    return digest_of("message", message.model_dump(mode="json"))


def _tools_digest(tools: Sequence[ToolSpec]) -> str:
    return digest_of("tools", [tool.model_dump(mode="json") for tool in tools])


class PromptRecorder:
    def __init__(self, engine: StateBackend) -> None:
        self._engine = engine
        self._known: OrderedDict[str, None] = OrderedDict()
        self._tools: dict[int, tuple[object, str]] = {}

    async def record(
        self,
        session_id: str,
        sent: Sent,
        *,
        assembled: Sequence[AgentMessage],
        origins: Origins | None,
    ) -> SentPrompt | None:
        """The call's record, its new parts stored; ``None`` when nothing was sent or a part
        cannot be stored (the answer is kept either way)."""
        request = sent.request
        if request is None:
            return None
        blobs: dict[str, PromptBlob] = {}
        system = digest_of("system", sent.system_prompt)
        blobs[system] = SystemBlob(text=sent.system_prompt)
        tools = None
        if request.tools:
            tools = self._tools_digest(request.tools, sent.run_tools)
            blobs[tools] = ToolsBlob.model_construct(tools=list(request.tools))
        messages = _references(request.messages, assembled, origins, blobs)
        appended = _references(sent.appended, (), None, blobs)
        try:
            await self._store(session_id, blobs)
        except InvalidPayload as exc:
            _log.warning("the prompt of a model call in %s is not recorded: %s", session_id, exc)
            return None
        return SentPrompt.model_construct(
            system_sha256=system,
            tools_sha256=tools,
            tool_calling=sent.tool_calling,
            messages=messages,
            appended=appended,
            max_output_tokens=request.max_output_tokens,
            temperature=request.temperature,
        )

    def _tools_digest(self, tools: Sequence[ToolSpec], run_tools: object | None) -> str:
        if run_tools is None:
            return _tools_digest(tools)
        cached = self._tools.get(id(run_tools))
        if cached is not None and cached[0] is run_tools:
            return cached[1]
        digest = _tools_digest(tools)
        self._tools[id(run_tools)] = (run_tools, digest)
        if len(self._tools) > 256:
            self._tools.pop(next(iter(self._tools)))
        return digest

    async def _store(self, session_id: str, blobs: dict[str, PromptBlob]) -> None:
        for digest, blob in blobs.items():
            key = blob_key(session_id, digest)
            if key in self._known:
                self._known.move_to_end(key)
                continue
            await self._engine.set_state(PROMPTS_SCOPE.name, key, PROMPTS_SCOPE.dump_value(blob))
            self._known[key] = None
            if len(self._known) > _KNOWN:
                self._known.popitem(last=False)


def _references(
    sent: Sequence[AgentMessage],
    assembled: Sequence[AgentMessage],
    origins: Origins | None,
    blobs: dict[str, PromptBlob],
) -> list[SentRef]:
    refs = _Refs(blobs)
    if origins is None:
        for message in sent:
            refs.message(message)
    elif sent is assembled:  # nothing changed the list: its runs, cut at rendered messages
        _unchanged(refs, assembled, origins)
    else:
        _matched(refs, sent, assembled, origins)
    return refs.done()


class _Refs:
    """References in order, consecutive path positions joined into one run of entries."""

    def __init__(self, blobs: dict[str, PromptBlob]) -> None:
        self._blobs = blobs
        self._refs: list[SentRef] = []
        self._run: tuple[int, int] | None = None
        self._ids: list[str] = []

    def entries(self, ids: list[str], first: int, last: int) -> None:
        if self._run is not None and self._run[1] + 1 == first and self._ids is ids:
            self._run = (self._run[0], last)
            return
        self._close()
        self._ids, self._run = ids, (first, last)

    def message(self, message: AgentMessage, digest: str | None = None) -> None:
        self._close()
        digest = digest or message_digest(message)
        self._blobs.setdefault(digest, MessageBlob.model_construct(message=message))
        self._refs.append(SentBlob.model_construct(sha256=digest))

    def done(self) -> list[SentRef]:
        self._close()
        return self._refs

    def _close(self) -> None:
        if self._run is not None:
            first, last = self._run
            self._refs.append(
                SentEntries.model_construct(
                    first=self._ids[first], last=self._ids[last], count=last - first + 1
                )
            )
            self._run = None


def _unchanged(refs: _Refs, assembled: Sequence[AgentMessage], origins: Origins) -> None:
    """Each segment's runs and rendered messages: a call costs what was rendered, not the
    length of its history."""
    sources = origins.sources
    index = 0
    for segment in origins.segments:
        start = segment.start
        low = bisect.bisect_left(sources.rendered_at, segment.start)
        high = bisect.bisect_left(sources.rendered_at, segment.stop)
        for position in sources.rendered_at[low:high]:
            if position > start:
                refs.entries(sources.ids, start, position - 1)
            message = assembled[index + position - segment.start]
            refs.message(message, sources.digest(position, message))
            start = position + 1
        if start < segment.stop:
            refs.entries(sources.ids, start, segment.stop - 1)
        index += len(segment)


def _matched(
    refs: _Refs, sent: Sequence[AgentMessage], assembled: Sequence[AgentMessage], origins: Origins
) -> None:
    """Each sent message matched to the assembled one it is (a hook rewrote the request)."""
    sources, positions = origins.sources, origins.positions()
    cursor = 0
    for message in sent:
        found = _match(message, assembled, cursor)
        if found is None:
            refs.message(message)
            continue
        cursor = found + 1
        position = positions[found]
        if position in sources.rendered:
            refs.message(assembled[found], sources.digest(position, assembled[found]))
        else:
            refs.entries(sources.ids, position, position)


def _match(message: AgentMessage, assembled: Sequence[AgentMessage], cursor: int) -> int | None:
    """The assembled message ``message`` is (the next one, or the one after it when a hook
    replaced the next one), else ``None``: a message a hook made or changed."""
    for index in (cursor, cursor + 1):
        if index < len(assembled):
            candidate = assembled[index]
            if message is candidate or message == candidate:
                return index
    return None
