"""A model call's record of what it sent: runs of entries as sent, rendered messages by digest,
parts stored once per session, and the same record whether the list went through a hook or not."""

from __future__ import annotations

from typing import Any

from tackroom.contracts.messages import AgentMessage, UserMessage
from tackroom.contracts.modelprompts import SentBlob, SentEntries
from tackroom.contracts.provider import ProviderRequest, ToolSpec
from tackroom.engine.embedded import EmbeddedEngine
from tackroom.engine.protocol import StateEntry
from tackroom.workers.orchestrator.sentprompt import Origins, PathSources, PromptRecorder, Sent


class Writes(EmbeddedEngine):
    """An embedded engine that counts its ``set_state`` calls."""

    def __init__(self) -> None:
        super().__init__()
        self.keys: list[str] = []

    async def set_state(
        self, scope: str, key: str, value: Any, *, expected_revision: int | None = None
    ) -> StateEntry:
        self.keys.append(key)
        return await super().set_state(scope, key, value, expected_revision=expected_revision)


def path(count: int, *, rendered: set[int]) -> tuple[PathSources, list[AgentMessage]]:
    sources = PathSources()
    read: list[AgentMessage] = []
    for position in range(count):
        sources.add(f"e{position}", rendered=position in rendered)
        text = f"clipped {position}" if position in rendered else f"entry {position}"
        read.append(UserMessage.text(text))
    return sources, read


def sent(messages: list[AgentMessage], *, system: str = "be brief") -> Sent:
    request = ProviderRequest(
        model="m", system_prompt=system, messages=messages, tools=[ToolSpec(name="add")]
    )
    capture = Sent()
    capture.sending(request, system_prompt=system)
    return capture


def shape(refs: list[Any]) -> list[tuple[str, ...]]:
    return [
        (r.first, r.last, str(r.count)) if isinstance(r, SentEntries) else ("blob",) for r in refs
    ]


async def test_runs_of_entries_are_cut_at_rendered_messages() -> None:
    sources, read = path(10, rendered={3, 7})
    async with Writes() as engine:
        await check_runs(engine, sources, read)


async def check_runs(engine: Writes, sources: PathSources, read: list[AgentMessage]) -> None:
    recorder = PromptRecorder(engine)
    origins = Origins(sources, [range(10)])
    record = await recorder.record("s", sent(read), assembled=read, origins=origins)
    assert record is not None
    assert shape(record.messages) == [
        ("e0", "e2", "3"),
        ("blob",),
        ("e4", "e6", "3"),
        ("blob",),
        ("e8", "e9", "2"),
    ]
    assert len(engine.keys) == 4  # the system prompt, the tools, two rendered messages
    again = await recorder.record("s", sent(read), assembled=read, origins=origins)
    assert again == record
    assert len(engine.keys) == 4  # nothing new to store


async def test_a_copied_list_records_as_the_original() -> None:
    """After a hook, the messages are equal copies: the same references, and the one it
    changed (or added) by its digest."""
    sources, read = path(8, rendered={2})
    origins = Origins(sources, [range(5, 6), range(0, 5), range(6, 8)])
    assembled = [read[5], *read[0:5], read[6:8][0], read[7]]
    async with Writes() as engine:
        await check_copies(PromptRecorder(engine), origins, assembled)


async def check_copies(
    recorder: PromptRecorder, origins: Origins, assembled: list[AgentMessage]
) -> None:
    plain = await recorder.record("s", sent(assembled), assembled=assembled, origins=origins)
    copies = [message.model_copy(deep=True) for message in assembled]
    hooked = await recorder.record("s", sent(copies), assembled=assembled, origins=origins)
    assert plain is not None
    assert hooked is not None
    assert hooked.messages == plain.messages
    assert shape(plain.messages) == [
        ("e5", "e5", "1"),
        ("e0", "e1", "2"),
        ("blob",),
        ("e3", "e4", "2"),
        ("e6", "e7", "2"),
    ]
    copies[1] = UserMessage.text("rewritten by a hook")
    copies.insert(4, UserMessage.text("added by a hook"))
    changed = await recorder.record("s", sent(copies), assembled=assembled, origins=origins)
    assert changed is not None
    assert shape(changed.messages) == [
        ("e5", "e5", "1"),
        ("blob",),  # rewritten
        ("e1", "e1", "1"),
        ("blob",),  # the rendered entry
        ("blob",),  # added
        ("e3", "e4", "2"),
        ("e6", "e7", "2"),
    ]
    assert isinstance(changed.messages[1], SentBlob)
