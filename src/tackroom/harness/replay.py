"""Record and replay: a finished run's cassette, and the run driven again from it, offline.

:func:`export_cassette` reads the cassette of a run from what the harness stored (see
:mod:`tackroom.workers.orchestrator.cassette`). :func:`replay` boots a harness of its own — on a
fresh engine (in memory by default), with the sessions worker and the real orchestrator, no
policy, approvals or budget — in which the cassette serves the provider's stream function under
the recorded provider's name and every tool under its function id (:mod:`.cassette_serve`). The
run starts again with its recorded id, inputs, system prompt (or the one given) and tools; the
orchestrator drives it, and the report says whether the replayed session's messages are the
recorded ones byte for byte, or where they first differ. With ``live_model`` a real model answers
instead (its provider worker is booted from ``config``) and the tools still answer from the
cassette.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from tackroom.contracts.bus import Caller
from tackroom.contracts.cassette import Cassette, CassetteTool, Divergence, ReplayReport
from tackroom.contracts.events import EVENTS, AgentEnd
from tackroom.contracts.messages import AgentMessage, AssistantMessage, CustomMessage, text_of
from tackroom.contracts.sessions import (
    APPEND_BATCH,
    ENSURE,
    MESSAGES,
    AppendBatchRequest,
    BatchItem,
    EnsureRequest,
    MessagesRequest,
)
from tackroom.contracts.turn import RUN_START, RunStartRequest
from tackroom.harness.cassette_serve import CassetteProvider, ToolAnswers, cassette_tools_worker
from tackroom.harness.errors import UsageError
from tackroom.harness.facade import Harness
from tackroom.harness.replay_diff import first_difference, message_divergence
from tackroom.runtime.config import AgentSettings, HarnessConfig, TracingSettings
from tackroom.runtime.typed import describe_validation_error
from tackroom.workers.orchestrator.cassette import NoCassette, read_cassette

__all__ = ["REPLAY_ENGINE", "export_cassette", "load_cassette", "replay", "save_cassette"]

REPLAY_ENGINE = "embedded::memory:"
_REPLAY_WORKERS = ["engine", "sessions", "orchestrator"]


def load_cassette(path: str | Path) -> Cassette:
    """A cassette written by ``tackroom replay --export`` (JSON)."""
    path = Path(path)
    try:
        return Cassette.model_validate_json(path.read_bytes())
    except OSError as exc:
        raise UsageError(f"cannot read the cassette {path}: {exc.strerror or exc}") from None
    except ValidationError as exc:
        raise UsageError(
            f"{path} is not a cassette: {describe_validation_error(exc)}"
            " (write one with `tackroom replay RUN --export FILE`)"
        ) from None


def save_cassette(cassette: Cassette, path: str | Path) -> None:
    Path(path).write_text(cassette.model_dump_json(indent=2) + "\n", encoding="utf-8")


async def export_cassette(bus: Caller, run: str, *, session: str | None = None) -> Cassette:
    """The cassette of ``run`` (a run id, or a session id for its latest run) on ``bus``."""
    try:
        return await read_cassette(bus, run, session=session)
    except NoCassette as exc:
        raise UsageError(str(exc)) from None


async def replay(
    cassette: Cassette,
    *,
    system_prompt: str | None = None,
    live_model: str | None = None,
    tools: Sequence[CassetteTool] | None = None,
    config: HarnessConfig | None = None,
    engine: str = REPLAY_ENGINE,
    timeout: float = 120.0,
) -> ReplayReport:
    """Drive the recorded run again and compare; see the module docstring.

    ``system_prompt`` replaces the recorded one; ``tools`` offers these descriptions and schemas
    instead of the recorded ones (a tool changed since: the same function ids still answer from
    the cassette); ``live_model`` (``PROVIDER:MODEL``) asks that model instead of the cassette.
    """
    started = time.perf_counter()
    answers = ToolAnswers(cassette)
    provider = None if live_model is not None else CassetteProvider(cassette)
    harness = Harness(
        live_model if live_model is not None else provider,
        config=_replay_config(config, live=live_model is not None),
        engine=engine,
        workers=[cassette_tools_worker(answers, tools=tools)],
        check_model=False,
    )
    async with harness:
        await _seed(harness, cassette)
        offered = [tool.function_id for tool in (cassette.tools if tools is None else tools)]
        end = await _run(
            harness, cassette, system_prompt=system_prompt, tools=offered, timeout=timeout
        )
        reply = await MESSAGES.call(harness.bus, MessagesRequest(session_id=cassette.session_id))
    replayed = [item.message for item in reply.messages]
    divergence = (provider.divergence if provider is not None else None) or _differences(
        cassette, replayed, end, live=live_model is not None
    )
    return ReplayReport(
        session_id=cassette.session_id,
        run_id=cassette.run_id,
        identical=divergence is None,
        divergence=divergence,
        live_model=live_model,
        model_calls=sum(isinstance(m, AssistantMessage) for m in replayed)
        - sum(isinstance(e.message, AssistantMessage) for e in cassette.history),
        tool_calls=answers.answered,
        messages=len(replayed),
        final_text=_final_text(replayed),
        seconds=round(time.perf_counter() - started, 4),
    )


def _replay_config(config: HarnessConfig | None, *, live: bool) -> HarnessConfig:
    """The agent workers without policy, approvals or budget (the cassette holds every decision);
    a live model's provider sections come from ``config``."""
    base = config or HarnessConfig(schema_version=1)
    sections: dict[str, dict[str, Any] | None] = dict(base.worker_config) if live else {}
    sections["orchestrator"] = {}
    return base.model_copy(
        update={
            "workers": ["engine"],
            "agent": AgentSettings(workers=list(_REPLAY_WORKERS)),
            "worker_config": sections,
            # A replay's spans would land in the config's trace store beside the real runs'.
            "tracing": TracingSettings(),
        }
    )


async def _seed(harness: Harness, cassette: Cassette) -> None:
    """The session as it stood before the run: its earlier history, with the same entry ids."""
    bus = harness.bus
    await ENSURE.call(bus, EnsureRequest(session_id=cassette.session_id))
    if cassette.history:
        items = [BatchItem(entry_id=e.entry_id, message=e.message) for e in cassette.history]
        await APPEND_BATCH.send(
            bus, AppendBatchRequest(session_id=cassette.session_id, entries=items)
        )


async def _run(
    harness: Harness,
    cassette: Cassette,
    *,
    system_prompt: str | None,
    tools: list[str],
    timeout: float,
) -> AgentEnd:
    request = RunStartRequest(
        session_id=cassette.session_id,
        run_id=cassette.run_id,
        provider=harness.provider,
        model=harness.model,
        # The recorded results carry every decision (plan mode's denials too): nothing is
        # decided again.
        mode="agent",
        messages=list(cassette.inputs),
        max_turns=cassette.max_turns,
        system_prompt=cassette.system_prompt if system_prompt is None else system_prompt,
        tools=tools,
    )
    # Only the run's end is read: the other frames are not parsed at all.
    subscription = await EVENTS.subscribe(harness.engine, cassette.session_id, after=0)
    try:
        reply = await RUN_START.call(harness.bus, request)
        if not reply.started:
            raise UsageError(f"the replay could not start: {reply.reason}")
        async with asyncio.timeout(timeout):
            async for record in subscription:
                data = record.data
                if not isinstance(data, dict) or data.get("type") != "agent_end":
                    continue
                event = EVENTS.parse(data)
                if isinstance(event, AgentEnd) and event.run_id == cassette.run_id:
                    return event
    except TimeoutError:
        raise UsageError(f"the replay did not end within {timeout:g}s") from None
    finally:
        await subscription.aclose()
    raise UsageError("the replay's event stream ended before the run did")


def _differences(
    cassette: Cassette, replayed: Sequence[AgentMessage], end: AgentEnd, *, live: bool
) -> Divergence | None:
    recorded = cassette.transcript()
    found = message_divergence(recorded, _with_recorded_notes(recorded, replayed), live=live)
    if found is not None:
        return found
    outcome = first_difference(
        {"state": cassette.state, "stop_reason": cassette.stop_reason},
        {"state": end.data.state, "stop_reason": end.data.stop_reason},
    )
    if outcome is None:
        return None
    return Divergence(where="outcome", field=outcome[0], recorded=outcome[1], replayed=outcome[2])


def _with_recorded_notes(
    recorded: Sequence[AgentMessage], replayed: Sequence[AgentMessage]
) -> list[AgentMessage]:
    """``replayed``, where the orchestrator wrote a note of its own (``turn_stopped``) where the
    recording has the same note, with the recorded note's timestamp: its clock is the replay's,
    not the recording's, and it is the one value a cassette cannot hand back."""
    merged = list(replayed)
    for index, message in enumerate(merged):
        twin = recorded[index] if index < len(recorded) else None
        if (
            isinstance(message, CustomMessage)
            and isinstance(twin, CustomMessage)
            and message.custom_type == twin.custom_type == "turn_stopped"
        ):
            merged[index] = message.model_copy(update={"timestamp": twin.timestamp})
    return merged


def _final_text(messages: Sequence[AgentMessage]) -> str:
    last = next((m for m in reversed(messages) if isinstance(m, AssistantMessage)), None)
    return "" if last is None else text_of(last.content)
