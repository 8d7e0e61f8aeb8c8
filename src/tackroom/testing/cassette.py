"""A recorded run as a test: load its cassette, script a provider with it, or replay it.

An incident in production becomes a regression test in three lines::

    cassette = Cassette.load("tests/cassettes/incident-42.json")   # tackroom replay RUN --export
    report = await cassette.replay()                                 # offline, the real turn
    assert report.identical, report.divergence.describe()

or, to run today's code (its tools, its prompt) against what the model answered then::

    async with Harness(cassette.as_provider(), tools=[...]) as harness:
        result = await harness.run(cassette.prompt)

:meth:`Cassette.as_provider` is a :class:`~tackroom.testing.ScriptedProvider` (strict: each turn
expects the results of the calls before it) serving the recorded provider's name, so the run's
messages carry the same ``provider`` and ``model``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tackroom.contracts.cassette import Cassette as CassetteRecord
from tackroom.contracts.cassette import ReplayReport
from tackroom.contracts.messages import (
    AssistantMessage,
    TextBlock,
    ThinkingBlock,
    UserMessage,
    text_of,
)
from tackroom.harness.replay import REPLAY_ENGINE, load_cassette, replay
from tackroom.runtime.config import HarnessConfig
from tackroom.testing.scripted import Script, ScriptedProvider, ScriptTurn

__all__ = ["Cassette", "RecordedProvider"]


class RecordedProvider(ScriptedProvider):
    """A :class:`ScriptedProvider` that also names the recorded model: ``Harness(provider)``
    runs it under that provider and model name, as the recorded run did."""

    def __init__(self, script: Script, *, name: str, model: str) -> None:
        super().__init__(script, name=name)
        self.model = model


class Cassette(CassetteRecord):
    """:class:`tackroom.contracts.cassette.Cassette` with the ways a test uses one."""

    @classmethod
    def load(cls, path: str | Path) -> Cassette:
        """A cassette file (``tackroom replay RUN --export FILE``)."""
        return cls.model_validate(load_cassette(path).model_dump())

    @property
    def prompt(self) -> str:
        """The text the run was started with."""
        return "\n".join(text_of(m.content) for m in self.inputs if isinstance(m, UserMessage))

    def as_script(self) -> Script:
        """The recorded answers as a script: each turn's text, thinking, calls (same ids) and
        usage, expecting the results of the calls the turn before made."""
        turns: list[ScriptTurn] = []
        awaited: list[str] = []
        for exchange in self.exchanges:
            turns.append(_turn(exchange.response, awaited))
            awaited = [call.id for call in exchange.response.function_calls()]
        # One chunk per recorded delta run: the script streams whole texts.
        return Script(turns, deltas="whole", argument_deltas="whole")

    def as_provider(self, *, name: str | None = None) -> RecordedProvider:
        """A scripted provider answering as the recorded model did (``name``: another provider
        name than the recorded one)."""
        return RecordedProvider(self.as_script(), name=name or self.provider, model=self.model)

    async def replay(
        self,
        *,
        system_prompt: str | None = None,
        live_model: str | None = None,
        config: HarnessConfig | None = None,
        engine: str = REPLAY_ENGINE,
    ) -> ReplayReport:
        """Drive the run again from this cassette (see :func:`tackroom.harness.replay.replay`)."""
        return await replay(
            self, system_prompt=system_prompt, live_model=live_model, config=config, engine=engine
        )


def _turn(message: AssistantMessage, awaited: list[str]) -> ScriptTurn:
    expect = {"has_function_result_for": list(awaited)} if awaited else None
    if message.stop_reason == "error":
        failure = {"kind": message.error_kind or "permanent", "message": message.error_message}
        return ScriptTurn.model_validate({"error": failure, "expect": expect})
    data: dict[str, Any] = {
        "text": "".join(b.text for b in message.content if isinstance(b, TextBlock)),
        "thinking": "".join(b.text for b in message.content if isinstance(b, ThinkingBlock)),
        "tool_calls": [
            {"name": call.tool_name, "arguments": call.arguments, "id": call.id}
            for call in message.function_calls()
        ],
        "usage": message.usage.model_dump(),
        "stop_reason": message.stop_reason,
        "expect": expect,
    }
    return ScriptTurn.model_validate(data)
