"""``tackroom audit export|verify|status|archive``: the hash-chained audit log.

``export`` writes JSONL: a header line (where the chain starts and ends) then one record per line,
each exactly its canonical JSON. ``verify`` checks the live log (through the audit worker) or an
exported file (here, no harness needed) and names the first edited, removed or reordered record.
Exit codes: 0 the chain holds; 1 it is broken, or no audit log answers; 2 a usage problem.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from pydantic import ValidationError

from tackroom.cli._bus import Caller, bus
from tackroom.cli._options import add_config, print_json
from tackroom.cli.audit_flows import add_flows_parser
from tackroom.contracts.audit import (
    ARCHIVE,
    EXPORT,
    GENESIS_HASH,
    STATUS,
    VERIFY,
    ArchiveRequest,
    ChainAnchor,
    ChainProblem,
    ExportRequest,
    StatusRequest,
    VerifyRequest,
)
from tackroom.contracts.bus import Function, Req, Resp
from tackroom.engine.errors import FunctionNotFound
from tackroom.kit.audit import (
    EXPORT_HEADER_KEY,
    ChainCheck,
    canonical,
    export_header,
    export_linked,
    verify_chain,
)
from tackroom.runtime.config import load_config

__all__ = ["add_parsers", "parse_since", "verify_file"]

_WORKERS = ("engine", "audit")
_NO_AUDIT = (
    "no audit log answers: add `audit` to agent.workers (it is there by default), or run"
    " `tackroom worker run audit`"
)
_AGO = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")
_UNIT = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    audit = commands.add_parser("audit", help="export and verify the hash-chained audit log")
    actions = audit.add_subparsers(dest="audit_command", required=True, metavar="CMD")

    export = actions.add_parser("export", help="records as JSONL (a header line, then records)")
    export.add_argument(
        "--since", type=parse_since, help="records from then on: ISO 8601, epoch seconds, or 7d/12h"
    )
    export.add_argument("--session", help="only the records of this session")
    export.add_argument("--tenant", help="only this tenant's records (its principals', sessions')")
    export.add_argument("--out", type=Path, help="write to FILE (default: stdout)")
    add_config(export)
    export.set_defaults(run=lambda args: asyncio.run(_export(args)))

    verify = actions.add_parser("verify", help="check the chain: the live log, or an export")
    verify.add_argument("file", nargs="?", type=Path, help="an exported JSONL file")
    add_config(verify)
    verify.set_defaults(run=_verify)

    status = actions.add_parser("status", help="what the audit log holds")
    add_config(status)
    status.set_defaults(run=lambda args: asyncio.run(_status(args)))

    archive = actions.add_parser(
        "archive", help="move old records to a JSONL archive (the chain's anchor is kept)"
    )
    archive.add_argument(
        "--older-than", type=float, metavar="DAYS", help="default: audit.retention_days"
    )
    add_config(archive)
    archive.set_defaults(run=lambda args: asyncio.run(_archive(args)))
    add_flows_parser(actions, since=parse_since)


def parse_since(text: str, *, now: float | None = None) -> float:
    """``7d`` / ``12h`` / ``30m`` ago, epoch seconds, or an ISO 8601 time (UTC unless it says)."""
    value = text.strip()
    ago = _AGO.match(value)
    if ago:
        return (time.time() if now is None else now) - float(ago.group(1)) * _UNIT[ago.group(2)]
    try:
        return float(value)
    except ValueError:
        pass
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: give an ISO 8601 time (2026-12-01T10:00), epoch seconds, or an age like"
            " 7d, 12h, 30m"
        ) from None
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()


async def _export(args: argparse.Namespace) -> int:
    since = args.since
    out: IO[str] = sys.stdout if args.out is None else args.out.open("w", encoding="utf-8")
    try:
        async with bus(load_config(args.config), _WORKERS, shared_bus_workers=()) as caller:
            count = await _write_export(
                out, caller, since=since, session_id=args.session, tenant=args.tenant
            )
    except FunctionNotFound:
        print(f"tackroom: error: {_NO_AUDIT}", file=sys.stderr)
        return 1
    finally:
        if out is not sys.stdout:
            out.close()
    if args.out is not None:
        print(f"{count} record(s) written to {args.out}", file=sys.stderr)
    return 0


async def _write_export(
    out: IO[str],
    caller: Caller,
    *,
    since: float | None,
    session_id: str | None,
    tenant: str | None = None,
) -> int:
    request = ExportRequest(since=since, session_id=session_id, tenant=tenant)
    page = await EXPORT.call(caller, request)
    filtered: dict[str, Any] | None = None
    if since or session_id or tenant:
        filtered = {"since": since, "session_id": session_id}
        if tenant:
            filtered["tenant"] = tenant
    head_seq = page.head_seq
    out.write(export_header(page.anchor, (head_seq, page.head_hash), filtered=filtered) + "\n")
    count = 0
    while True:
        for record in page.records:
            if record["seq"] > head_seq:
                return count  # appended while exporting: the next export has it
            out.write(canonical(record) + "\n")
            count += 1
        if page.next_after is None:
            return count
        page = await EXPORT.call(caller, request.model_copy(update={"after_seq": page.next_after}))


def _verify(args: argparse.Namespace) -> int:
    if args.file is not None:
        try:
            data = args.file.read_bytes()
        except OSError as exc:
            print(f"tackroom: error: {args.file}: cannot read it ({exc})", file=sys.stderr)
            return 2
        return _report(verify_file(data), source=str(args.file))
    return asyncio.run(_verify_live(args))


async def _ask(
    args: argparse.Namespace, function: Function[Req, Resp], request: Req
) -> Resp | None:
    """One call to the audit worker; ``None`` (said on stderr) when no audit log answers."""
    try:
        async with bus(load_config(args.config), _WORKERS, shared_bus_workers=()) as caller:
            return await function.call(caller, request)
    except FunctionNotFound:
        print(f"tackroom: error: {_NO_AUDIT}", file=sys.stderr)
        return None


async def _verify_live(args: argparse.Namespace) -> int:
    report = await _ask(args, VERIFY, VerifyRequest())
    if report is None:
        return 1
    check = ChainCheck(
        report.records,
        report.head_seq,
        report.head_hash,
        report.problem,
        first_seq=report.anchor.first_seq,
    )
    return _report(check, source="the audit log")


def verify_file(data: bytes) -> ChainCheck:
    """Check an exported file's bytes: from its header's anchor to its head (a file without a
    header is checked from its first record, and its end cannot be checked)."""
    lines = list(_numbered(data))
    try:
        header = _header(lines[0][1]) if lines else None
    except ValueError:
        problem = ChainProblem(
            seq=None, line=1, kind="edited", message="line 1 (the export header) was edited"
        )
        return ChainCheck(0, 0, GENESIS_HASH, problem)
    if header is not None:
        lines = lines[1:]
        anchor = ChainAnchor.model_validate(header["anchor"])
        head = (int(header["head_seq"]), str(header["head_hash"]))
        return verify_chain(lines, anchor=anchor, head=head, linked=export_linked(header))
    anchor = _anchor_of(lines[0][1]) if lines else ChainAnchor()
    return verify_chain(lines, anchor=anchor)


def _numbered(data: bytes) -> Iterator[tuple[int, str]]:
    """Every line with its number (a final newline ends the last line, it adds none); a line
    that is not UTF-8 becomes one no record can match (U+FFFD where the bad bytes were)."""
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    for number, line in enumerate(lines, start=1):
        yield number, line.decode("utf-8", errors="replace")


_HEADER_KEYS = {EXPORT_HEADER_KEY, "anchor", "head_seq", "head_hash", "filter"}
_HEADER_VERSIONS = (1, 2)


def _header(line: str) -> dict[str, Any] | None:
    """The export header on ``line``, ``None`` when the line is no header; ``ValueError`` when it
    is one that was changed (not exactly as ``export`` writes it)."""
    try:
        value = json.loads(line)
    except ValueError:
        value = None
    if not isinstance(value, dict) or EXPORT_HEADER_KEY not in value:
        if f'"{EXPORT_HEADER_KEY}"' in line or '"head_hash"' in line:
            raise ValueError("a damaged export header")
        return None
    try:
        ChainAnchor.model_validate(value.get("anchor"))
        int(value["head_seq"])
    except (KeyError, TypeError, ValidationError) as exc:
        raise ValueError("a damaged export header") from exc
    intact = set(value) == _HEADER_KEYS and value[EXPORT_HEADER_KEY] in _HEADER_VERSIONS
    if not intact or canonical(value) != line or not isinstance(value["head_hash"], str):
        raise ValueError("a damaged export header")
    return value


def _anchor_of(line: str) -> ChainAnchor:
    try:
        first = json.loads(line)
        return ChainAnchor(first_seq=first["seq"], prev_hash=first["prev_hash"])
    except (ValueError, KeyError, TypeError):
        return ChainAnchor()


def _report(check: ChainCheck, *, source: str) -> int:
    if check.problem is not None:
        print(f"tackroom: audit: {source}: {check.problem.message}", file=sys.stderr)
        return 1
    if check.records == 0:
        print(f"ok: {source} holds no records (head seq {check.last_seq})")
    elif check.linked:
        print(
            f"ok: {check.records} record(s) of {source}, seq {check.first_seq}..{check.last_seq},"
            f" head {check.last_hash[:16]}"
        )
    else:
        print(
            f"ok: {check.records} record(s) of {source} between seq {check.first_seq} and"
            f" {check.last_seq}, each intact and in order (a filtered export: the records"
            " between them cannot be checked)"
        )
    return 0


async def _status(args: argparse.Namespace) -> int:
    status = await _ask(args, STATUS, StatusRequest())
    if status is None:
        return 1
    print_json(STATUS.dump_response(status))
    return 0


async def _archive(args: argparse.Namespace) -> int:
    reply = await _ask(args, ARCHIVE, ArchiveRequest(older_than_days=args.older_than))
    if reply is None:
        return 1
    if reply.file is None:
        print("nothing to archive")
    else:
        print(
            f"{reply.archived} record(s) archived to {reply.file}; the log now starts at seq"
            f" {reply.anchor.first_seq}"
        )
    return 0
