"""``tackroom sessions pin|unpin|compact``: what every later context of a session carries.

    tackroom sessions pin SESSION ENTRY_ID           # carry this entry whole into every context
    tackroom sessions pin SESSION --text "Answer in French."   # a new rule entry, pinned
    tackroom sessions pin SESSION rule-1 --text "..."   # ... with the id rule-1 (once on retry)
    tackroom sessions unpin SESSION ENTRY_ID
    tackroom sessions compact SESSION [--model PROVIDER:MODEL]

Exit codes: 0 done (``compact`` also when there was nothing to summarise: it says why), 1 a
call failed, 2 a usage problem (no such session or entry, an entry that cannot be pinned).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from tackroom.cli._bus import bus
from tackroom.contracts.context import PINNED_RULE_TYPE
from tackroom.contracts.messages import CustomMessage
from tackroom.contracts.sessions import MESSAGES, MessagesRequest, MessagesResponse, PathMessage
from tackroom.kit.compacting import session_model
from tackroom.kit.context import compaction_details
from tackroom.runtime.config import HarnessConfig, load_config

# The harness is imported by the commands that use it: `sessions list` does not pay for it.

__all__ = ["add_curate_parsers", "entry_line", "summary"]


def add_curate_parsers(
    actions: argparse._SubParsersAction[argparse.ArgumentParser],
    *,
    common: Callable[[argparse.ArgumentParser], None],
) -> None:
    pin = actions.add_parser(
        "pin", help="carry an entry (or a rule given as --text) whole into every later context"
    )
    pin.add_argument("session_id")
    pin.add_argument(
        "entry_id",
        nargs="?",
        help="the entry to pin (see `sessions show`); with --text, the new rule's id",
    )
    pin.add_argument("--text", help="a rule to add to the session and pin")
    common(pin)
    pin.set_defaults(run=lambda args: _usage_exit(_pin(args)))

    unpin = actions.add_parser("unpin", help="stop carrying a pinned entry")
    unpin.add_argument("session_id")
    unpin.add_argument("entry_id")
    common(unpin)
    unpin.set_defaults(run=lambda args: _usage_exit(_unpin(args)))

    compact = actions.add_parser(
        "compact", help="summarise a session's oldest history now (pinned entries stay whole)"
    )
    compact.add_argument("session_id")
    compact.add_argument(
        "--model", help="PROVIDER:MODEL for the summary (default: the session's, else agent.model)"
    )
    compact.add_argument(
        "--script", type=Path, help="the script a scripted model answers the summary from"
    )
    common(compact)
    compact.set_defaults(run=lambda args: _usage_exit(_compact(args)))


def _usage_exit(work: Coroutine[Any, Any, int]) -> int:
    from tackroom.harness.errors import UsageError

    try:
        code = asyncio.run(work)
    except UsageError as exc:
        print(f"tackroom: error: {exc}", file=sys.stderr)
        return 2
    return code


async def _pin(args: argparse.Namespace) -> int:
    from tackroom.harness.errors import UsageError
    from tackroom.harness.sessions import pin_entry

    if args.entry_id is None and args.text is None:
        raise UsageError("name the ENTRY_ID to pin, or give a rule with --text")
    async with bus(load_config(args.config)) as caller:
        entry_id = await pin_entry(caller, args.session_id, args.entry_id, text=args.text)
    print(json.dumps({"entry_id": entry_id}) if args.json else entry_id)
    return 0


async def _unpin(args: argparse.Namespace) -> int:
    from tackroom.harness.sessions import unpin_entry

    async with bus(load_config(args.config)) as caller:
        pinned = await unpin_entry(caller, args.session_id, args.entry_id)
    if args.json:
        print(json.dumps({"pinned": pinned}))
    return 0


async def _compact(args: argparse.Namespace) -> int:
    from tackroom.harness import Harness, UsageError

    config = load_config(args.config)
    model = args.model or await _session_model(config, args.session_id) or config.agent.model
    if not model or ":" not in model:
        raise UsageError(
            f"session {args.session_id!r} has no answer to take a model from: name one with"
            " --model PROVIDER:MODEL (or agent.model in tackroom.yaml)"
        )
    if (
        model.startswith("scripted:")
        and args.script is None
        and "scripted" not in config.worker_config
    ):
        raise UsageError(
            f"session {args.session_id!r} is answered by {model}, which replays a script: give"
            " the summary's with --script FILE (or name another model with --model)"
        )
    harness = Harness(model, config=config, script=args.script, check_model=False)
    async with harness:
        reply = await harness.sessions.compact(args.session_id)
    if args.json:
        print(reply.model_dump_json(indent=2))
    elif reply.compacted:
        print(
            f"{reply.entry_id}: {reply.replaced} entries summarised"
            f" (~{reply.tokens_before} -> ~{reply.tokens_after} tokens)"
        )
    else:
        print(f"nothing compacted: {reply.detail}")
    return 0


async def _session_model(config: HarnessConfig, session_id: str) -> str | None:
    from tackroom.harness.sessions import usage_errors

    async with bus(config, read_only=True) as caller, usage_errors():
        path: MessagesResponse = await MESSAGES.call(caller, MessagesRequest(session_id=session_id))
    found = session_model(path)
    return None if found is None else ":".join(found)


def entry_line(item: PathMessage, text: str, *, pinned: bool) -> str:
    """One entry of ``sessions show``: its id, kind, marks, and a preview (a compaction says
    what it stands for)."""
    message = item.message
    kind: str = message.role
    if isinstance(message, CustomMessage):
        kind = "rule" if message.custom_type == PINNED_RULE_TYPE else message.custom_type
    marks = "  (pinned)" if pinned else ""
    details = compaction_details(message)
    if details is not None:
        text = f"summary of {len(details.replaces)} entries ({_span(details.replaces)}): {text}"
    return f"{item.entry_id}  [{kind}]{marks}  {text}"


def _span(ids: list[str]) -> str:
    if len(ids) <= 2:
        return ", ".join(ids)
    return f"{ids[0]} .. {ids[-1]}"


def summary(message: dict[str, Any]) -> str:
    """A message (as JSON) on one line of at most 160 characters: its text and calls, or the
    error of a model call that failed."""
    if message.get("stop_reason") == "error":
        kind = message.get("error_kind") or "permanent"
        return " ".join(f"(error, {kind}) {message.get('error_message') or ''}".split())[:160]
    parts = []
    for block in message.get("content", []):
        if block.get("type") == "text":
            parts.append(block["text"])
        elif block.get("type") == "function_call":
            # ``function_id`` until messages' schema_version 2 (an older sessions worker sends it)
            name = block.get("tool_name", block.get("function_id"))
            parts.append(f"{name}({json.dumps(block.get('arguments', {}))})")
    return " ".join(" ".join(parts).split())[:160]
