"""A failure injected at every write of a turn, on every backend: the turn still ends, and
nothing a step committed is computed twice.

The workload: the model calls a non-idempotent tool (a side effect counted outside tackroom),
then answers. A first run counts the turn's writes (every worker's, through one
:class:`~tackroom.testing.faults.FaultyEngine`); then, for each write ``N``, a fresh engine runs
the same turn with write ``N`` failing once — not written (``before``), or written with its
acknowledgement lost (``after``) — and the turn must:

- end ``stopped``/``end`` (the failed delivery is retried; a failed ``run::start`` is retried
  by the client with the same run id);
- run the tool exactly once (a call cut short before its result was kept is reported to the
  model as "outcome unknown", never repeated);
- never call the model again for an answer already committed: for each turn, the answer the
  session keeps is the one from the *last* model call answering that turn;
- keep the baseline's session entry ids, each once, and give every event id one content.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pytest

from tackroom.contracts.messages import AgentMessage
from tackroom.engine import EngineError, open_engine
from tackroom.testing import FunctionModel, ModelInfo, Script, ToolCall, wait_until
from tackroom.testing.backends import BACKENDS, engine_url_for
from tackroom.testing.faults import FaultyEngine

from .harness import RunningHarness, events_of, messages_of, running_harness, wait_for_terminal

pytestmark = pytest.mark.parametrize("backend", list(BACKENDS))


class CountingModel:
    """Answers by the turn (assistant messages so far); each answer names its model call."""

    def __init__(self) -> None:
        self.calls: dict[str, list[int]] = defaultdict(list)
        """Per session, the turn each model call answered, in call order."""
        self.model = FunctionModel(self.answer, name="faulty", model="m")

    def answer(self, messages: list[AgentMessage], info: ModelInfo) -> str | ToolCall:
        calls = self.calls[info.session_id or ""]
        turn = sum(1 for m in messages if m.role == "assistant") + 1
        calls.append(turn)
        if turn == 1:
            record = next(t.name for t in info.tools if t.name.endswith("record"))
            return ToolCall(record, {"note": f"n{len(calls)}"}, id="call_1")
        return f"done, answer of model call {len(calls)}"


@dataclass
class Outcome:
    state: tuple[str, str | None]
    side_effects: list[str]
    entries: list[dict[str, Any]]
    events: list[dict[str, Any]]
    model_calls: list[int]
    writes: list[str]
    run_id: str

    def entry_ids(self) -> list[str]:
        """Entry ids without the run id that prefixes them."""
        return [e["entry_id"].removeprefix(self.run_id) for e in self.entries]


async def run_turn(
    h: RunningHarness,
    engine: FaultyEngine,
    model: CountingModel,
    *,
    fail_at: int | None,
    mode: Literal["before", "after"],
) -> Outcome:
    session = "baseline" if fail_at is None else f"{mode}-{fail_at}"
    engine.arm(fail_at=fail_at, mode=mode)
    for _ in range(3):
        try:
            await h.start(session, "record a note", run_id=f"run-{session}")
            break
        except EngineError:
            continue  # a client retries a start that failed, with the same run id
    view = await wait_for_terminal(h, session)

    async def ended() -> list[dict[str, Any]] | None:
        events = [record.data for record in await events_of(h.engine, session)]
        return events if any(e["type"] == "agent_end" for e in events) else None

    await wait_until(ended, message=f"agent_end of {session}")
    events = await ended()
    assert events is not None
    return Outcome(
        state=(view.state, view.stop_reason),
        side_effects=[line for line in h.tools.lines() if f" {session} " in line],
        entries=await messages_of(h.engine, session),
        events=events,
        model_calls=model.calls[session],
        writes=list(engine.writes),
        run_id=f"run-{session}",
    )


def check(outcome: Outcome, baseline: Outcome, label: str) -> None:
    assert outcome.state == ("stopped", "end"), label
    assert len(outcome.side_effects) == 1, label
    assert outcome.entry_ids() == baseline.entry_ids(), label
    # The answer kept for each turn comes from the last model call that answered it.
    kept = [e for e in outcome.entries if e["message"]["role"] == "assistant"]
    for turn, entry in enumerate(kept, start=1):
        last_call = max(i for i, t in enumerate(outcome.model_calls, start=1) if t == turn)
        text = json.dumps(entry["message"])
        assert f"n{last_call}" in text or f"model call {last_call}" in text, (label, turn)
    contents: dict[str, str] = {}
    for event in outcome.events:
        if event["type"] == "message_update":
            continue
        body = json.dumps(event["data"], sort_keys=True)
        assert contents.setdefault(event["event_id"], body) == body, (label, event["event_id"])


async def test_a_fault_at_any_write_of_a_turn_loses_and_repeats_nothing(
    backend: str, tmp_path: Path
) -> None:
    engine = FaultyEngine(open_engine(engine_url_for(backend, tmp_path)))
    model = CountingModel()
    failures: list[str] = []
    async with running_harness(tmp_path, Script(), engine=engine, model=model.model) as h:
        baseline = await run_turn(h, engine, model, fail_at=None, mode="before")
        check(baseline, baseline, "baseline")
        assert baseline.model_calls == [1, 2]
        for mode in ("before", "after"):
            for n in range(1, len(baseline.writes) + 1):
                label = f"{mode} write {n} ({baseline.writes[n - 1]})"
                outcome = await run_turn(h, engine, model, fail_at=n, mode=mode)
                assert engine.failed is not None, label
                try:
                    check(outcome, baseline, label)
                except AssertionError as exc:
                    failures.append(f"{label}: {exc}")
    assert not failures, "\n".join(failures)


async def test_an_engine_outage_in_a_step_is_retried_without_an_error_in_the_log(
    backend: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 16, 7: an unavailable engine is not an unexpected error of the turn; the step is
    retried and the turn completes, with no ERROR line and no traceback."""
    engine = FaultyEngine(open_engine(engine_url_for(backend, tmp_path)))
    model = CountingModel()
    async with running_harness(tmp_path, Script(), engine=engine, model=model.model) as h:
        baseline = await run_turn(h, engine, model, fail_at=None, mode="before")
        ledger_write = next(
            n for n, label in enumerate(baseline.writes, start=1) if "turn-ledger" in label
        )
        # The call's start event, appended during the step's work just before its ledger entry
        # (its audit fact, on audit::facts, comes between them).
        start_event = max(
            n
            for n, label in enumerate(baseline.writes[: ledger_write - 1], start=1)
            if label.startswith("append agent::events")
        )
        assert ledger_write - start_event <= 2
        caplog.clear()
        outcome = await run_turn(h, engine, model, fail_at=start_event, mode="before")
    assert outcome.state == ("stopped", "end")
    assert engine.failed is not None
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
    assert "Traceback" not in caplog.text
