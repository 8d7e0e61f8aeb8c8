"""The audit chain's rules, shared by the audit worker and ``tackroom audit verify``.

- :func:`canonical` is the one encoding: JSON with sorted keys, no whitespace, UTF-8, no NaN. A
  stored record and an exported line are exactly the canonical encoding of the record, so *any*
  changed byte either changes a value (the hash no longer matches) or the form (it is no longer
  canonical) — both are reported as an edit.
- :func:`record_hash` is sha256 over the canonical encoding of a record without its ``hash``.
- :func:`verify_chain` walks records in order from an anchor and names the first that breaks.
- :func:`export_header` is the first line of an export or archive file: where its chain starts
  (the anchor: the first record's ``seq`` and the hash of the record before it) and ends (the
  head); :func:`export_linked` says whether a file's records are a whole stretch of the chain.
- :func:`record_fact` is how a worker records a fact it owns: an append to ``audit::facts`` that
  never fails its caller (no audit worker running is fine: the stream keeps the fact).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from tackroom.contracts.audit import (
    FACTS,
    FACTS_GROUP,
    AuditFact,
    AuditRecord,
    ChainAnchor,
    ChainProblem,
)
from tackroom.contracts.policy import PolicyStatus
from tackroom.engine.protocol import Appender

__all__ = [
    "EXPORT_HEADER_KEY",
    "EXPORT_VERSION",
    "ChainCheck",
    "canonical",
    "digest",
    "export_header",
    "export_linked",
    "record_fact",
    "record_hash",
    "record_policy_load",
    "verify_chain",
]

EXPORT_HEADER_KEY = "audit_export"
"""The key of an export file's first line: ``{"audit_export": 2, "anchor": …, "head_seq": …}``."""
EXPORT_VERSION = 2
"""The export header's version. 2: an export from a time (``since``) is a whole stretch of the
chain, anchored at the record before its first, so only a ``session_id`` or ``tenant`` filter
leaves records out. 1 (still read): any ``filter`` left records out."""

_log = logging.getLogger("tackroom.audit")


def canonical(value: Any) -> str:
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def digest(value: Any) -> str:
    """``sha256:<hex>`` of ``value``'s canonical JSON (tool arguments, results)."""
    return "sha256:" + hashlib.sha256(canonical(value).encode("utf-8")).hexdigest()


def record_hash(record: dict[str, Any]) -> str:
    body = {key: value for key, value in record.items() if key != "hash"}
    return hashlib.sha256(canonical(body).encode("utf-8")).hexdigest()


async def record_policy_load(engine: Appender, status: PolicyStatus, *, actor: str) -> None:
    """A policy file (or the built-in defaults) came into force: path, digest, generation."""
    fact = AuditFact(
        fact_id=f"policy:{actor}:{status.digest}:{status.loaded_at!r}",
        kind="policy_loaded",
        actor=actor,
        at=status.loaded_at,
        fact={
            "language": status.language,
            "source": status.source,
            "path": status.path,
            "digest": status.digest,
            "generation": status.generation,
            "rule_count": status.rule_count,
            "default_decision": status.default_decision,
        },
    )
    await record_fact(engine, fact)


async def record_fact(engine: Appender, fact: AuditFact) -> None:
    """Append ``fact`` to ``audit::facts``; a failure is logged, never raised to the caller.

    Inside an atomic unit of work the append is kept for the unit's commit, which then writes
    the fact with what it records, or neither (the commit's failure is the unit's).
    """
    try:
        await engine.append(FACTS.name, FACTS_GROUP, fact)
    except Exception as exc:  # an audit write must not break the action it records
        _log.warning("audit: fact %s (%s) not recorded: %s", fact.fact_id, fact.kind, exc)


def export_header(
    anchor: ChainAnchor, head: tuple[int, str], *, filtered: dict[str, Any] | None = None
) -> str:
    """An export file's first line: where its chain starts (``anchor``) and ends (``head``, the
    log's last record when it was written); ``filtered``: what chose its records (``since``, and
    ``session_id`` / ``tenant``, which leave records out, so their links cannot be checked)."""
    return canonical(
        {
            EXPORT_HEADER_KEY: EXPORT_VERSION,
            "anchor": anchor.model_dump(mode="json"),
            "head_seq": head[0],
            "head_hash": head[1],
            "filter": filtered,
        }
    )


def export_linked(header: dict[str, Any]) -> bool:
    """Whether an export header's records are every record from its anchor to its head (so each
    link, and the end, can be checked)."""
    filtered = header.get("filter")
    if not filtered:
        return True
    if not isinstance(filtered, dict):
        return False
    if header.get(EXPORT_HEADER_KEY) == 1:
        return False
    return not (filtered.get("session_id") or filtered.get("tenant"))


@dataclass(frozen=True, slots=True)
class ChainCheck:
    """What a walk checked: ``records`` records, seq ``first_seq``..``last_seq`` (``first_seq``
    is the anchor's when nothing was read); ``linked``: the links between them too."""

    records: int
    last_seq: int
    last_hash: str
    problem: ChainProblem | None
    first_seq: int = 1
    linked: bool = True


@dataclass(slots=True)
class _Read:
    record: dict[str, Any] | None
    seq: int | None
    problem: str | None


def _read(text: str) -> _Read:
    """A line or stored body: a canonical JSON object with an integer seq, or what is wrong."""
    try:
        value = json.loads(text)
    except ValueError:
        return _Read(None, None, "not valid JSON")
    if not isinstance(value, dict):
        return _Read(None, None, "not a JSON object")
    seq = value.get("seq")
    seq = seq if isinstance(seq, int) and not isinstance(seq, bool) else None
    try:
        form = canonical(value)
    except ValueError:
        return _Read(value, seq, "not in canonical form")
    if form != text:
        return _Read(value, seq, "not in canonical form")
    return _Read(value, seq, None)


def _where(seq: int | None, position: int, unit: str, after: int) -> str:
    if seq is None:
        return f"the record at {unit} {position} (after seq {after})"
    return f"record seq {seq} ({unit} {position})"


def verify_chain(
    items: Iterable[tuple[int, str]],
    *,
    anchor: ChainAnchor,
    head: tuple[int, str] | None = None,
    unit: str = "line",
    linked: bool = True,
) -> ChainCheck:
    """Check ``(position, text)`` records in order from ``anchor``; ``head`` (seq, hash) is where
    the log must end. ``linked=False`` (a filtered export) checks each record and the order only."""
    expected, prev = anchor.first_seq, anchor.prev_hash
    first = anchor.first_seq
    count = 0
    rest = iter(items)

    def check(problem: ChainProblem | None) -> ChainCheck:
        return ChainCheck(count, expected - 1, prev, problem, first_seq=first, linked=linked)

    for position, text in rest:
        problem = _check_one(text, position, unit, expected, prev, rest, linked=linked)
        if problem is not None:
            return check(problem)
        record = json.loads(text)
        if count == 0:
            first = record["seq"]
        count += 1
        expected, prev = record["seq"] + 1, record["hash"]
    if head is not None and linked:
        return check(_check_head(expected - 1, prev, head))
    return check(None)


def _check_one(
    text: str,
    position: int,
    unit: str,
    expected: int,
    prev: str,
    rest: Iterator[tuple[int, str]],
    *,
    linked: bool,
) -> ChainProblem | None:
    read = _read(text)
    where = _where(read.seq, position, unit, expected - 1)

    def problem(kind: str, message: str) -> ChainProblem:
        line = position if unit == "line" else None
        return ChainProblem(seq=read.seq, line=line, kind=kind, message=message)

    if read.problem is not None or read.record is None or read.seq is None:
        reason = read.problem or "has no seq"
        return problem("edited", f"{where} was edited: {reason}")
    if read.record.get("hash") != record_hash(read.record):
        return problem("edited", f"{where} was edited: its hash does not match its content")
    try:
        AuditRecord.model_validate(read.record)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first["loc"])
        return problem("edited", f"{where} is not a valid audit record ({field}: {first['msg']})")
    seq = read.seq
    if not linked:
        if seq < expected:
            return problem("reordered", f"{where} comes after seq {expected - 1}: reordered")
        return None
    if seq > expected:
        if any(_seq_of(later) == expected for _, later in rest):
            return problem(
                "reordered", f"{where} stands where seq {expected} belongs: records were reordered"
            )
        missing = f"seq {expected}" if seq == expected + 1 else f"seqs {expected}..{seq - 1}"
        return problem("removed", f"{missing} missing before {where}: records were removed")
    if seq < expected:
        return problem(
            "reordered", f"{where} comes after seq {expected - 1}: records were reordered"
        )
    if read.record["prev_hash"] != prev:
        return problem(
            "edited",
            f"{where} does not follow the record before it (prev_hash differs): a record was"
            " replaced",
        )
    return None


def _seq_of(text: str) -> int | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    seq = value.get("seq") if isinstance(value, dict) else None
    return seq if isinstance(seq, int) else None


def _check_head(last_seq: int, last_hash: str, head: tuple[int, str]) -> ChainProblem | None:
    head_seq, head_hash = head
    if last_seq < head_seq:
        first = last_seq + 1
        missing = f"seq {first}" if first == head_seq else f"seqs {first}..{head_seq}"
        return ChainProblem(
            seq=first,
            kind="truncated",
            message=f"the log ends at seq {last_seq} but its head is seq {head_seq}: {missing}"
            " removed",
        )
    if last_seq > head_seq:
        return ChainProblem(
            seq=last_seq,
            kind="edited",
            message=f"record seq {last_seq} lies past the recorded head (seq {head_seq}): added",
        )
    if last_hash != head_hash:
        return ChainProblem(
            seq=last_seq,
            kind="edited",
            message=f"record seq {last_seq} is not the recorded head (hash differs): replaced",
        )
    return None
