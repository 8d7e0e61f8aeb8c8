"""The durable turn survives SIGKILL at every step: nothing lost, nothing doubled, no gaps.

For each kill point a real child process (``crash_harness.py``) starts a scripted run — the
model calls a tool with a countable side effect, a steering message waits in the inbox, the
model answers taking it into account — and is held at the kill point, then killed with SIGKILL.
A second child on the same engine URL only boots; the orchestrator wakes the run, which must end
``stopped``/``end``. Then, in this process:

- the session holds exactly the expected entries, in order (no loss, no duplicate);
- the non-idempotent tool ran at most once — exactly once when it had finished before the kill —
  and a call caught mid-way is reported to the model as "outcome unknown", not repeated; an
  idempotent one is retried;
- ``agent::events`` for the session is ``1..N`` without a gap; the restarted harness serves a
  client reconnecting from its last seen sequence exactly the rest; a subscription from any
  cursor yields exactly the records after it;
- the scripted provider saw no request it did not expect (so the resumed model call got the
  transcript it should: the tool result and the steering message).

The state the killed harness left (turn state, ledger, inbox) is checked too, through the engine
API on the same URL, so each case proves it really stopped where it says. Every test runs on each
backend of ``tackroom.testing.backends`` (on ``nats`` the children and this process share the
test server and a namespace of the case's own). Kill points (``CASES`` in ``crash_harness.py``):

- provisioning committed with the prompt in its outbox, the prompt not yet stored;
- after ``run::start``, before the first step; after provisioning, the model call in flight;
- mid-stream: deltas shown, the model silent;
- inside the tool, non-idempotent and idempotent (it blocks after its side effect);
- after the tool, its batch committed, before its result is stored (from the outbox);
- before the steering inbox is read; after it is read and committed, before its message is
  stored (from the outbox); after the step committed, before the message leaves the inbox.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tackroom.contracts.events import EVENTS
from tackroom.engine import Engine, StreamRecord, open_engine
from tackroom.runtime import Host, load_worker
from tackroom.testing import running_engine, take
from tackroom.testing.backends import BACKENDS, engine_url_for
from tackroom.workers.orchestrator.dispatch import LEDGER_SCOPE
from tackroom.workers.orchestrator.record import TurnRecord

from ..crashkit import run_killable
from .crash_harness import (
    CALL_ID,
    CASES,
    PROMPT,
    RUN_ID,
    SESSION,
    SIDE_EFFECTS,
    STEERING,
    KillPoint,
)
from .harness import events_of, messages_of, roles, text, turn_of

CHILD_TIMEOUT = 20.0

EXPECTED_ENTRIES = [
    (f"{RUN_ID}-m0", "user"),
    (f"{RUN_ID}-t1-a", "assistant"),
    (f"{RUN_ID}-fr-{CALL_ID}", "function_result"),
    (f"{RUN_ID}-t1-in0", "user"),
    (f"{RUN_ID}-t2-a", "assistant"),
]


@dataclass
class ChildOutput:
    events: list[dict[str, Any]] = field(default_factory=list)
    markers: list[dict[str, Any]] = field(default_factory=list)
    returncode: int | None = None

    def add(self, item: dict[str, Any]) -> None:
        if "event" in item:
            self.events.append(item["event"])
        else:
            self.markers.append(item)

    def seen(self) -> set[str]:
        return {e["type"] for e in self.events} | {m["marker"] for m in self.markers}

    def marker(self, name: str) -> dict[str, Any]:
        found = [m for m in self.markers if m["marker"] == name]
        assert found, f"no {name!r} marker in {self.markers}"
        return found[-1]


@dataclass
class Outcome:
    """What one case left behind: at the kill, and after the resumed run."""

    case: KillPoint
    first: ChildOutput
    resumed: ChildOutput | None
    cursor: int
    """The last sequence the client saw from the killed harness."""
    at_kill: dict[str, Any]
    record: TurnRecord
    entries: list[dict[str, Any]]
    entry_count: int
    events: list[StreamRecord]
    tail_after_mid: list[StreamRecord]
    mid: int
    side_effects: list[str]
    ledger: Any
    steering_left: list[Any]
    """What the steering inbox still holds after the run (a repeat waiting to happen)."""


_OUTCOMES: dict[tuple[str, str], Outcome | Exception] = {}


async def outcome_of(backend: str, name: str, tmp_path_factory: pytest.TempPathFactory) -> Outcome:
    """Run the case once per backend and test session (several tests read each outcome, or its
    failure)."""
    if (backend, name) not in _OUTCOMES:
        workdir = tmp_path_factory.mktemp(f"{backend}-{name}")
        url = engine_url_for(backend, workdir)
        try:
            _OUTCOMES[backend, name] = await _crash_and_resume(CASES[name], workdir, url)
        except Exception as exc:
            _OUTCOMES[backend, name] = exc
            raise
    outcome = _OUTCOMES[backend, name]
    if isinstance(outcome, Exception):
        raise AssertionError(f"case {name} on {backend} failed in an earlier test: {outcome!r}")
    return outcome


async def _run_child(
    url: str,
    workdir: Path,
    case: KillPoint,
    phase: str,
    *,
    after: int = 0,
    kill_on: frozenset[str] | None = None,
) -> ChildOutput:
    """Run ``crash_harness`` in a child process; with ``kill_on``, SIGKILL it once every event
    type and marker in ``kill_on`` has been printed. Its stderr goes to ``<phase>.stderr``."""
    output = ChildOutput()
    output.returncode = await run_killable(
        "tests.turn.crash_harness",
        [url, str(workdir), f"--case={case.name}", f"--phase={phase}", f"--after={after}"],
        workdir=workdir,
        phase=phase,
        on_line=output.add,
        kill_when=None if kill_on is None else lambda: kill_on <= output.seen(),
        timeout=CHILD_TIMEOUT,
    )
    return output


async def _state_at_kill(url: str, workdir: Path) -> dict[str, Any]:
    async with running_engine(url) as engine:
        record = await turn_of(engine, SESSION)
        ledger = await engine.get_state(LEDGER_SCOPE, f"{SESSION}/{RUN_ID}/{CALL_ID}")
        inbox = await engine.get_state("inbox", f"{SESSION}/steering")
        return {
            "state": None if record is None else record.state,
            "ledger": None if ledger is None else ledger.value.get("status"),
            "steering_waiting": inbox is not None and len(inbox.value.get("items", [])) > 0,
            "side_effects": _side_effects(workdir),
        }


def _side_effects(workdir: Path) -> list[str]:
    path = workdir / SIDE_EFFECTS
    return path.read_text().splitlines() if path.exists() else []


async def _crash_and_resume(case: KillPoint, workdir: Path, url: str) -> Outcome:
    """Kill the first child at the case's kill point, inspect the engine it left through the
    engine API (the same URL opened in this process), resume in a second child, then read the
    outcome in this process — the same way on every backend."""
    first = await _run_child(url, workdir, case, "first", kill_on=case.kill_on or None)
    cursor = max((e["seq"] for e in first.events if not e["live"]), default=0)
    resumed: ChildOutput | None = None
    at_kill: dict[str, Any] = {}
    if case.kill_on:
        at_kill = await _state_at_kill(url, workdir)
        resumed = await _run_child(url, workdir, case, "resume", after=cursor)
    host = Host(engine=open_engine(url), workers=[load_worker("engine"), load_worker("sessions")])
    async with host:
        engine = host.engine
        record = await turn_of(engine, SESSION)
        assert record is not None
        entries = await messages_of(engine, SESSION)
        info = await engine.trigger("session-tree::get", {"session_id": SESSION})
        events = await events_of(engine, SESSION)
        mid = len(events) // 2
        tail = await _subscribe_from(engine, mid, len(events) - mid)
        ledger = await engine.get_state(LEDGER_SCOPE, f"{SESSION}/{RUN_ID}/{CALL_ID}")
        inbox = await engine.trigger(
            "session-inbox::peek", {"session_id": SESSION, "name": "steering"}
        )
    return Outcome(
        case=case,
        first=first,
        resumed=resumed,
        cursor=cursor,
        at_kill=at_kill,
        record=record,
        entries=entries,
        entry_count=info["entry_count"],
        events=events,
        tail_after_mid=tail,
        mid=mid,
        side_effects=_side_effects(workdir),
        ledger=None if ledger is None else ledger.value,
        steering_left=inbox["items"],
    )


async def _subscribe_from(engine: Engine, after: int, count: int) -> list[StreamRecord]:
    subscription = await engine.subscribe(EVENTS.name, SESSION, after=after)
    try:
        return await take(subscription, count, timeout=5)
    finally:
        await subscription.aclose()


KILL_POINTS = [name for name in CASES if name != "uninterrupted"]

# Every test runs on every backend: the children and this process open the same engine URL.
pytestmark = pytest.mark.parametrize("backend", list(BACKENDS))


# -- the kill point was really reached ------------------------------------------------------------
@pytest.mark.parametrize("name", KILL_POINTS)
async def test_the_killed_harness_stopped_at_its_kill_point(
    backend: str, name: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    outcome = await outcome_of(backend, name, tmp_path_factory)
    case, at_kill = outcome.case, outcome.at_kill
    atomic = backend == "embedded"  # its transactions are atomic: see test_transactions
    expected = (case.state_at_kill_atomic if atomic else None) or case.state_at_kill
    assert at_kill["state"] == expected
    assert at_kill["ledger"] == case.ledger_at_kill
    assert at_kill["steering_waiting"] == case.steering_waiting_at_kill
    tool_ran = case.ledger_at_kill is not None
    assert len(at_kill["side_effects"]) == (1 if tool_ran else 0)
    assert "agent_end" not in outcome.first.seen()
    if case.stall_stream:  # killed mid-stream: deltas shown (live), the message never finished
        assert "message_update" in outcome.first.seen()
        assert "message_complete" not in outcome.first.seen()


# -- the run completes, with the session exactly as an uninterrupted run leaves it -----------------
@pytest.mark.parametrize("name", ["uninterrupted", *KILL_POINTS])
async def test_the_resumed_turn_completes_without_loss_or_duplicates(
    backend: str, name: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    outcome = await outcome_of(backend, name, tmp_path_factory)
    case = outcome.case
    final = (outcome.resumed or outcome.first).marker("finished")
    assert (final["state"], final["stop_reason"]) == ("stopped", "end")
    assert final["provider"]["violations"] == []
    assert (outcome.record.state, outcome.record.stop_reason) == ("stopped", "end")
    assert outcome.record.turn_count == 2

    assert roles(outcome.entries) == EXPECTED_ENTRIES
    assert outcome.steering_left == []  # taken once: never to be taken again by a later run
    assert outcome.entry_count == len(EXPECTED_ENTRIES)  # nothing on a side branch either
    prompt, opening, result, steering, answer = (e["message"] for e in outcome.entries)
    assert text(prompt) == PROMPT
    assert text(steering) == STEERING
    assert [b["id"] for b in opening["content"] if b["type"] == "function_call"] == [CALL_ID]
    assert text(answer) == "Recorded n1, and n2 as you asked."

    assert len(outcome.side_effects) == case.side_effects
    assert all(line == f"{case.tool} {SESSION} {CALL_ID} n1" for line in outcome.side_effects)
    assert outcome.ledger is not None
    assert outcome.ledger["status"] == "done"
    if case.outcome_unknown:
        assert result["is_error"] is True
        assert result["details"] == {"error": "outcome_unknown"}
        assert "outcome of this call is unknown" in text(result)
    else:
        assert result["is_error"] is False
        assert json.loads(text(result)) == {"schema_version": 1, "recorded": "n1"}


# -- the event stream ----------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["uninterrupted", *KILL_POINTS])
async def test_the_event_stream_is_gap_free_across_the_crash(
    backend: str, name: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    outcome = await outcome_of(backend, name, tmp_path_factory)
    events = outcome.events
    seqs = [record.seq for record in events]
    assert seqs == list(range(1, len(events) + 1))
    assert all(r.data["session_id"] == SESSION and r.data["run_id"] == RUN_ID for r in events)
    ends = [r for r in events if r.data["type"] == "agent_end"]
    assert len(ends) == 1
    assert ends[0] is events[-1]
    assert (ends[0].data["data"]["state"], ends[0].data["data"]["stop_reason"]) == (
        "stopped",
        "end",
    )

    # The killed harness's client saw 1..cursor; reconnecting to the restarted one from that
    # cursor, it gets exactly the rest.
    first_seqs = [e["seq"] for e in outcome.first.events if not e["live"]]
    assert first_seqs == list(range(1, outcome.cursor + 1))
    if outcome.resumed is not None:
        resumed = [e for e in outcome.resumed.events if not e["live"]]
        assert [e["seq"] for e in resumed] == list(range(outcome.cursor + 1, len(events) + 1))
        assert [e["event_id"] for e in resumed] == [
            r.data["event_id"] for r in events[outcome.cursor :]
        ]
    # Deltas (and a snapshot) are live: handed to the client as they streamed, never stored.
    assert not {"message_update", "message_snapshot"} & {r.data["type"] for r in events}

    # Any cursor: a subscription yields exactly the records after it.
    assert [(r.seq, r.data) for r in outcome.tail_after_mid] == [
        (r.seq, r.data) for r in events[outcome.mid :]
    ]


@pytest.mark.parametrize("name", KILL_POINTS)
async def test_events_repeated_by_the_resumed_step_keep_their_event_ids(
    backend: str, name: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Dropping repeats by ``event_id`` gives a client the uninterrupted run's events.

    ``message_update`` deltas are left out: a resumed model call streams again under a stream id
    of its own (the final ``message_complete`` carries the message).
    """
    baseline = await outcome_of(backend, "uninterrupted", tmp_path_factory)
    outcome = await outcome_of(backend, name, tmp_path_factory)

    def shape(records: list[StreamRecord]) -> list[tuple[str, str]]:
        seen: set[str] = set()
        out = []
        for record in records:
            event = record.data
            if event["type"] == "message_update" or event["event_id"] in seen:
                continue
            seen.add(event["event_id"])
            out.append((event["event_id"], event["type"]))
        return out

    baseline_ids = [r.data["event_id"] for r in baseline.events]
    assert len(set(baseline_ids)) == len(baseline_ids)  # one id per event in a run
    by_id: dict[str, str] = {}
    for record in outcome.events:
        event = record.data
        assert by_id.setdefault(event["event_id"], event["type"]) == event["type"]
    assert shape(outcome.events) == shape(baseline.events)


@pytest.mark.parametrize("name", KILL_POINTS)
async def test_a_repeated_event_id_repeats_the_same_event(
    backend: str, name: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """``AgentEvent``: a client may drop a repeat by ``event_id``, so a repeat must say the same.

    Only ``duration_ms`` may differ: a call answered from the ledger after a restart ends again
    (for a client that saw it start) without a duration.
    """
    outcome = await outcome_of(backend, name, tmp_path_factory)

    def comparable(event: dict[str, Any]) -> dict[str, Any]:
        data = {k: v for k, v in event["data"].items() if k != "duration_ms"}
        return {**event, "data": data}

    first_by_id: dict[str, dict[str, Any]] = {}
    for record in outcome.events:
        event = comparable(record.data)
        first = first_by_id.setdefault(event["event_id"], event)
        assert event == first, f"event {event['event_id']} repeated with other content"
