"""The audit chain holds on an untouched log and breaks, naming the record, after any one byte of
any record is changed, a record is removed, or two are swapped — in the live store and in an
exported file. A pruned chain verifies from its anchor; a fact is recorded once; concurrent
appenders do not fork the chain."""

from __future__ import annotations

import itertools
import json
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tackroom.cli.audit import verify_file
from tackroom.contracts.audit import AuditFact, ChainProblem
from tackroom.contracts.principal import Principal
from tackroom.kit.audit import ChainCheck, canonical, export_header
from tackroom.workers.audit.store import AuditStore

FACTS = [
    AuditFact(
        fact_id="event:r1:c1:gate",
        kind="gate_decision",
        principal=Principal(id="alice", roles=("deployer",)),
        session_id="s1",
        run_id="r1",
        fact={"function_id": "fs::write", "decision": "needs_approval", "rule_id": "writes"},
    ),
    AuditFact(
        fact_id="event:r1:c1:approval",
        kind="approval_resolved",
        actor="bob",
        session_id="s1",
        run_id="r1",
        at=1764000000.25,
        fact={"decision": "allow", "approver": "bob", "reason": "ok — ✓"},
    ),
    AuditFact(
        fact_id="event:r1:t1:budget",
        kind="budget_decision",
        session_id="s1",
        run_id="r1",
        fact={"allowed": True, "estimate_usd": 1.5e-05},
    ),
    AuditFact(
        fact_id="fact:cred:1",
        kind="credential_used",
        actor="credentials",
        fact={"provider": "openai", "fingerprint": "sha256:0badc0de"},
    ),
    AuditFact(fact_id="fact:del:s0", kind="session_deleted", session_id="s0", fact={"entries": 3}),
]


class Clock:
    def __init__(self, now: float = 1_764_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        self.now += 60.0
        return self.now


@pytest.fixture
def store(tmp_path: Path) -> Iterator[AuditStore]:
    store = AuditStore.open(tmp_path / "audit.db", clock=Clock())
    for fact in FACTS:
        store.append(fact)
    yield store
    store.close()


def bodies(path: Path) -> list[tuple[int, str]]:
    with sqlite3.connect(path) as db:
        return list(db.execute("SELECT seq, body FROM records ORDER BY seq"))


def set_body(path: Path, seq: int, body: str) -> None:
    with sqlite3.connect(path) as db:
        db.execute("UPDATE records SET body = ? WHERE seq = ?", (body, seq))


def flipped(text: str, index: int) -> str:
    """``text`` with the character at ``index`` changed (its low bit flipped)."""
    return text[:index] + chr(ord(text[index]) ^ 1) + text[index + 1 :]


def names(problem: ChainProblem | None, *, seq: int | None = None, line: int | None = None) -> str:
    assert problem is not None, "the chain should be broken"
    if seq is not None and problem.seq == seq:
        assert f"seq {seq}" in problem.message
    else:
        assert (line is not None and f"line {line}" in problem.message) or (
            f"row {seq}" in problem.message
        ), problem
    return problem.message


def test_an_untouched_log_verifies(store: AuditStore) -> None:
    report = store.verify()
    assert report.ok
    assert report.records == 5
    assert report.head_seq == 5
    assert report.problem is None


def test_any_changed_character_of_any_stored_record_is_named(store: AuditStore) -> None:
    path = store.path
    for seq, body in bodies(path):
        for index in range(len(body)):
            set_body(path, seq, flipped(body, index))
            report = store.verify()
            assert not report.ok, (seq, index)
            names(report.problem, seq=seq)
        set_body(path, seq, body)
    assert store.verify().ok


def test_a_removed_stored_record_is_named(store: AuditStore) -> None:
    path = store.path
    saved = bodies(path)
    for seq, _ in saved:
        with sqlite3.connect(path) as db:
            db.execute("DELETE FROM records WHERE seq = ?", (seq,))
        problem = store.verify().problem
        assert problem is not None
        assert problem.kind in {"removed", "truncated"}, problem
        assert problem.seq == (seq + 1 if seq < len(saved) else seq)
        with sqlite3.connect(path) as db:
            db.execute(
                "INSERT INTO records (seq, fact_id, ts, kind, body) VALUES (?, ?, 0, 'x', ?)",
                (seq, f"restored-{seq}", dict(saved)[seq]),
            )
    assert store.verify().ok


def test_two_swapped_stored_records_are_named(store: AuditStore) -> None:
    path = store.path
    saved = dict(bodies(path))
    for first, second in itertools.combinations(saved, 2):
        set_body(path, first, saved[second])
        set_body(path, second, saved[first])
        problem = store.verify().problem
        assert problem is not None
        assert problem.kind == "reordered", (first, second, problem)
        assert problem.seq == second
        assert f"seq {second}" in problem.message
        set_body(path, first, saved[first])
        set_body(path, second, saved[second])
    assert store.verify().ok


def exported(store: AuditStore) -> bytes:
    anchor, head, records = store.page(after=0, since=None, session_id=None, limit=100)
    lines = [export_header(anchor, head), *(canonical(record) for record in records)]
    return ("\n".join(lines) + "\n").encode("utf-8")


def check(data: bytes) -> ChainCheck:
    return verify_file(data)


def test_an_exported_file_verifies_and_any_changed_byte_breaks_it(store: AuditStore) -> None:
    data = exported(store)
    assert check(data).problem is None
    assert check(data).records == 5
    lines = data.split(b"\n")
    offset = 0
    for number, line in enumerate(lines, start=1):
        for index in range(len(line) + (1 if number < len(lines) else 0)):
            changed = bytearray(data)
            changed[offset + index] ^= 1
            problem = check(bytes(changed)).problem
            assert problem is not None, (number, index)
            if number > 1 and index < len(line):
                names(problem, seq=number - 1, line=number)
        offset += len(line) + 1


def test_a_removed_or_swapped_exported_record_is_named(store: AuditStore) -> None:
    header, *records = exported(store).decode().splitlines()
    for drop in range(len(records)):
        kept = [header, *records[:drop], *records[drop + 1 :]]
        problem = check(("\n".join(kept) + "\n").encode()).problem
        assert problem is not None
        assert problem.kind in {"removed", "truncated"}
        assert f"seq {drop + 2 if drop + 1 < len(records) else drop + 1}" in problem.message
    for first, second in itertools.combinations(range(len(records)), 2):
        swapped = list(records)
        swapped[first], swapped[second] = swapped[second], swapped[first]
        problem = check(("\n".join([header, *swapped]) + "\n").encode()).problem
        assert problem is not None
        assert problem.kind == "reordered"
        assert f"seq {second + 1}" in problem.message


def test_a_filtered_export_checks_each_record(store: AuditStore) -> None:
    anchor, head, records = store.page(after=0, since=None, session_id="s1", limit=100)
    assert [r["seq"] for r in records] == [1, 2, 3]
    header = export_header(anchor, head, filtered={"session_id": "s1"})
    lines = [header, *(canonical(r) for r in records)]
    assert check(("\n".join(lines)).encode()).problem is None
    lines[2] = lines[2].replace('"bob"', '"eve"', 1)
    names(check(("\n".join(lines)).encode()).problem, seq=2, line=3)


def recorded_at(path: Path, seq: int) -> float:
    with sqlite3.connect(path) as db:
        return float(db.execute("SELECT ts FROM records WHERE seq = ?", (seq,)).fetchone()[0])


def test_an_export_from_a_time_is_anchored_so_a_removed_record_is_named(
    store: AuditStore,
) -> None:
    since = recorded_at(store.path, 3)
    anchor, head, records = store.page(after=0, since=since, session_id=None, limit=100)
    assert [r["seq"] for r in records] == [3, 4, 5]
    assert (anchor.first_seq, anchor.prev_hash) == (3, records[0]["prev_hash"])
    header = export_header(anchor, head, filtered={"since": since, "session_id": None})
    lines = [header, *(canonical(r) for r in records)]
    whole = check(("\n".join(lines) + "\n").encode())
    assert whole.problem is None
    assert (whole.records, whole.first_seq, whole.last_seq, whole.linked) == (3, 3, 5, True)
    for drop in range(1, len(lines)):
        kept = lines[:drop] + lines[drop + 1 :]
        problem = check(("\n".join(kept) + "\n").encode()).problem
        assert problem is not None, f"record seq {drop + 2} removed unnoticed"
        assert problem.kind in {"removed", "truncated"}, problem
        assert f"seq {drop + 2}" in problem.message, problem.message


def test_an_export_from_a_time_pages_on_from_its_anchor(store: AuditStore) -> None:
    since = recorded_at(store.path, 2)
    anchor, _, first = store.page(after=0, since=since, session_id=None, limit=2)
    again, _, rest = store.page(after=first[-1]["seq"], since=since, session_id=None, limit=2)
    assert [r["seq"] for r in first + rest] == [2, 3, 4, 5]
    assert again == anchor
    after = recorded_at(store.path, 5) + 1
    later, head, none = store.page(after=0, since=after, session_id=None, limit=9)
    assert none == []
    assert (later.first_seq, later.prev_hash) == (head[0] + 1, head[1])
    empty = check((export_header(later, head, filtered={"since": 1.0}) + "\n").encode())
    assert (empty.problem, empty.records) == (None, 0)


def test_a_version_1_export_from_a_time_still_checks_each_record(store: AuditStore) -> None:
    """Before version 2 an export from a time kept the log's anchor: its links cannot be told."""
    anchor, head, _ = store.page(after=0, since=None, session_id=None, limit=1)
    _, _, records = store.page(after=2, since=None, session_id=None, limit=100)
    header = json.loads(export_header(anchor, head, filtered={"since": 1.0, "session_id": None}))
    header["audit_export"] = 1
    lines = [canonical(header), *(canonical(r) for r in records)]
    found = check(("\n".join(lines) + "\n").encode())
    assert (found.problem, found.linked, found.first_seq, found.last_seq) == (None, False, 3, 5)


def test_a_pruned_chain_verifies_from_its_anchor_and_the_archive_on_its_own(
    store: AuditStore, tmp_path: Path
) -> None:
    moved, archive = store.archive(older_than=150.0, directory=tmp_path / "archive")
    assert moved == 3
    assert archive is not None
    report = store.verify()
    assert report.ok
    assert report.records == 2
    assert report.anchor.first_seq == 4
    assert check(archive.read_bytes()).records == 3
    assert check(archive.read_bytes()).problem is None
    store.append(AuditFact(fact_id="after", kind="run_end"))
    assert store.verify().ok
    with sqlite3.connect(store.path) as db:
        db.execute("DELETE FROM records WHERE seq = 4")
    assert names(store.verify().problem, seq=5)


def test_a_fact_is_recorded_once(store: AuditStore) -> None:
    again = store.append(FACTS[1])
    assert again.duplicate
    assert again.seq == 2
    assert store.verify().records == 5


def test_a_run_principal_is_filled_in_for_its_later_facts(store: AuditStore) -> None:
    store.append(AuditFact(fact_id="later", kind="tool_call", run_id="r1"))
    _, _, records = store.page(after=5, since=None, session_id=None, limit=10)
    assert records[0]["principal"] == Principal(id="alice", roles=("deployer",)).model_dump(
        mode="json"
    )


def test_concurrent_appenders_on_one_file_do_not_fork_the_chain(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    stores = [AuditStore.open(path) for _ in range(2)]

    def write(store: AuditStore, name: str) -> None:
        for n in range(50):
            store.append(AuditFact(fact_id=f"{name}-{n}", kind="tool_call"))

    threads = [
        threading.Thread(target=write, args=(store, f"w{i}")) for i, store in enumerate(stores)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    report = stores[0].verify()
    assert report.ok
    assert report.records == 100
    assert report.head_seq == 100
    for store in stores:
        store.close()
