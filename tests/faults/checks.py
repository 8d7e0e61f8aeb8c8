"""What a fault trial counts, read back through the engine API after the fact.

For one session whose run is :data:`~tests.faults.workload.SCRIPT`: did it end ``stopped``/``end``;
are its entries exactly an uninterrupted run's (none lost, none extra, none changed since a
client or a kill snapshot saw it); did each non-idempotent tool call's side effect (a line in the
side-effect file, outside tackroom) happen at most once, and each call answered as a success
really run; is ``agent::events`` gap-free, each ``event_id`` always with the same content, and
what clients were served exactly the stored records in order.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tackroom.contracts.turn import TURN_STEP_QUEUE
from tackroom.engine import StreamRecord, open_engine
from tackroom.runtime import Host, load_worker
from tackroom.workers.orchestrator.record import TurnRecord
from tests.turn.harness import events_of, messages_of, roles, turn_of

from .report import Tally
from .workload import CALLS, IDEMPOTENT, SIDE_EFFECTS, expected_entries

__all__ = ["Snapshot", "check_session", "side_effects", "snapshot"]


@dataclass
class Snapshot:
    """One session as the engine holds it."""

    record: TurnRecord | None
    entries: list[dict[str, Any]]
    entry_count: int
    events: list[StreamRecord]
    dead_steps: int = 0
    """The session's ``turn::step`` messages in the dead letters."""


async def snapshot(url: str, sessions: list[str]) -> dict[str, Snapshot]:
    """Each session's turn record, entries and events, through a host of this process."""
    host = Host(engine=open_engine(url), workers=[load_worker("engine"), load_worker("sessions")])
    out: dict[str, Snapshot] = {}
    async with host:
        engine = host.engine
        dead = Counter(
            str((letter.payload or {}).get("session_id"))
            for letter in await engine.list_dead_letters(TURN_STEP_QUEUE)
            if isinstance(letter.payload, dict)
        )
        for session in sessions:
            record = await turn_of(engine, session)
            if record is None:
                out[session] = Snapshot(None, [], 0, [])
                continue
            info = await engine.trigger("session-tree::get", {"session_id": session})
            out[session] = Snapshot(
                record=record,
                entries=await messages_of(engine, session),
                entry_count=info["entry_count"],
                events=await events_of(engine, session),
                dead_steps=dead[session],
            )
    return out


_OUTAGE = "the model call failed: the NATS connection dropped"
"""How a run ends when a dropped connection is taken for the model's failure (a known bug)."""


def side_effects(workdir: Path) -> list[str]:
    path = workdir / SIDE_EFFECTS
    return path.read_text().splitlines() if path.exists() else []


def _comparable(event: dict[str, Any]) -> dict[str, Any]:
    """An event as a client may compare repeats: ``duration_ms`` may differ (a call answered
    from the ledger after a restart ends again without one)."""
    data = event.get("data")
    if isinstance(data, dict):
        data = {k: v for k, v in data.items() if k != "duration_ms"}
    return {**event, "data": data}


def _text(message: dict[str, Any]) -> str:
    return " ".join(b.get("text", "") for b in message["content"] if isinstance(b, dict))


def check_session(
    session: str,
    run_id: str,
    final: Snapshot,
    lines: list[str],
    *,
    seen: Sequence[Snapshot] = (),
    served: Sequence[list[dict[str, Any]]] = (),
) -> Tally:
    """Count what went wrong with one session's run. ``seen``: snapshots taken earlier (after a
    kill), whose entries must all still be there unchanged; ``served``: the events each client
    (child process) printed, in order, each resuming from the last one's cursor."""
    tally = Tally(turns=1)
    ended = _check_ending(tally, session, final)
    by_id = _check_entries(tally, session, run_id, final, ended=ended, seen=seen)
    _check_calls(tally, session, run_id, lines, by_id, ended=ended)
    _check_events(tally, session, final.events, ended=ended)
    _check_served(tally, session, final.events, served, ended=ended)
    tally.completed = int(ended and tally.faults() == {})
    return tally


def _check_ending(tally: Tally, session: str, final: Snapshot) -> bool:
    """Whether the run ended ``stopped``/``end``; if not, count why."""
    record = final.record
    ended = record is not None and (record.state, record.stop_reason) == ("stopped", "end")
    if ended:
        return True
    said = (
        "no turn record"
        if record is None
        else (f"{record.state}/{record.stop_reason} at step {record.step}: {record.error}")
    )
    tally.details.append(f"{session}: the run did not end: {said}")
    outage = record is not None and record.error is not None and _OUTAGE in record.error.message
    if outage:
        tally.ended_by_outage = 1
    elif final.dead_steps and record is not None and not record.terminal:
        tally.dead_lettered = 1
    else:
        tally.unfinished = 1
    return False


def _check_entries(
    tally: Tally,
    session: str,
    run_id: str,
    final: Snapshot,
    *,
    ended: bool,
    seen: Sequence[Snapshot],
) -> dict[str, Any]:
    """Entries: exactly the uninterrupted run's, in order, nothing on a side branch, none an
    earlier snapshot saw lost or changed. Returns each entry's message by entry id."""
    expected = expected_entries(run_id)
    got = roles(final.entries)
    # A run that ended early (counted apart) never wrote its last entries: not a loss.
    missing = [e for e in expected if e not in got] if ended else []
    extra = [e for e in got if e not in expected]
    tally.lost_or_changed_entries += len(missing) + len(extra)
    if missing or extra:
        tally.details.append(f"{session}: entries missing {missing}, not expected {extra}")
    if ended and not missing and not extra and got != expected:
        tally.lost_or_changed_entries += 1
        tally.details.append(f"{session}: entries out of order: {got}")
    if final.entry_count > len(got):
        tally.lost_or_changed_entries += final.entry_count - len(got)
        tally.details.append(f"{session}: {final.entry_count} entries, {len(got)} on the path")
    by_id = {e["entry_id"]: e["message"] for e in final.entries}
    for earlier in seen:
        for entry in earlier.entries:
            if by_id.get(entry["entry_id"]) != entry["message"]:
                tally.lost_or_changed_entries += 1
                tally.details.append(f"{session}: entry {entry['entry_id']} lost or changed")
    return by_id


def _check_calls(
    tally: Tally,
    session: str,
    run_id: str,
    lines: list[str],
    by_id: dict[str, Any],
    *,
    ended: bool,
) -> None:
    """Tool calls: a non-idempotent call's side effect at most once; a success really ran."""
    for call_id, function, note in CALLS:
        ran = lines.count(f"{function} {session} {call_id} {note}")
        if call_id not in IDEMPOTENT:
            tally.duplicated_effects += max(0, ran - 1)
        result = by_id.get(f"{run_id}-fr-{call_id}")
        if result is None:
            if ended:
                tally.skipped_calls += 1
        elif result.get("is_error"):
            said = _text(result)
            tally.error_texts.append(f"{function}: {said[:160]}")
            if "unknown tool" in said:
                tally.skipped_calls += 1  # the run went on without the tools it asked for
            else:
                tally.error_results += 1
        elif ran == 0:
            tally.skipped_calls += 1


def _check_events(tally: Tally, session: str, events: list[StreamRecord], *, ended: bool) -> None:
    """Events: 1..N, one content per event id, one agent_end, last."""
    seqs = [r.seq for r in events]
    if seqs != list(range(1, len(events) + 1)):
        tally.event_gaps += max(1, (max(seqs, default=0) - len(set(seqs))))
        tally.details.append(f"{session}: stored seqs {seqs}")
    first_by_id: dict[str, dict[str, Any]] = {}
    for stored in events:
        event = _comparable(stored.data)
        first = first_by_id.setdefault(event["event_id"], event)
        if first != event:
            tally.reissued_events += 1
            tally.details.append(f"{session}: event {stored.seq} repeats {first} as {event}")
    if not ended:
        return
    ends = {r.data["event_id"] for r in events if r.data["type"] == "agent_end"}
    if len(ends) != 1:
        tally.reissued_events += max(1, len(ends) - 1)
        tally.details.append(f"{session}: agent_end ids {sorted(ends)}")
        return
    first_end = next(i for i, r in enumerate(events) if r.data["type"] == "agent_end")
    for late in events[first_end + 1 :]:
        if late.data["type"] != "agent_end":
            tally.events_after_end += 1
            tally.details.append(f"{session}: after agent_end, event {late.seq}: {late.data}")


def _check_served(
    tally: Tally,
    session: str,
    events: list[StreamRecord],
    served: Sequence[list[dict[str, Any]]],
    *,
    ended: bool,
) -> None:
    """What clients were served: the stored records, in order, each client from the last cursor."""
    by_seq = {r.seq: r.data for r in events}
    served_seqs: list[int] = []
    for client in served:
        for event in client:
            served_seqs.append(event["seq"])
            stored_event = by_seq.get(event["seq"])
            if stored_event is None or any(
                stored_event.get(k) != v for k, v in event.items() if k != "seq"
            ):
                tally.reissued_events += 1
                tally.details.append(f"{session}: served {event}, stored {stored_event}")
    if served and served_seqs != list(range(1, len(served_seqs) + 1)):
        counts = Counter(served_seqs)
        tally.event_gaps += sum(1 for s in range(1, max(served_seqs) + 1) if s not in counts)
        tally.reissued_events += sum(n - 1 for n in counts.values())
        tally.details.append(f"{session}: served seqs {served_seqs}")
    if served and ended and len(served_seqs) != len(events):
        tally.event_gaps += abs(len(events) - len(served_seqs))
        tally.details.append(
            f"{session}: served {len(served_seqs)} of {len(events)} stored events: {served_seqs}"
        )


def final_answer(final: Snapshot) -> str:
    """The last assistant message's text (what the run answered)."""
    assistants = [e["message"] for e in final.entries if e["message"]["role"] == "assistant"]
    return _text(assistants[-1]) if assistants else ""
