"""``tackroom sessions list|show|fork|delete|pin|unpin|compact``: browse, branch, delete and
curate sessions.

Runs the sessions worker in-process on the config's engine (read-only for ``list`` and ``show``);
when a ``tackroom serve`` already owns that engine, it goes through the serve's local endpoint
instead. ``compact`` makes a model call, so it boots the agent's workers (as ``tackroom run``
does) with the session's model, unless ``--model`` names another.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import os
from datetime import UTC, datetime
from typing import Any

from tackroom.cli._bus import Caller, bus
from tackroom.cli._options import add_config, print_json
from tackroom.cli.curate import add_curate_parsers, entry_line, summary
from tackroom.contracts.sessions import DELETE, FORK, LIST, MESSAGES, SET_TITLE
from tackroom.runtime.config import load_config
from tackroom.runtime.typed import request_for

__all__ = ["add_parsers", "bus"]


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sessions = commands.add_parser("sessions", help="list, show, fork, pin and compact sessions")
    actions = sessions.add_subparsers(dest="sessions_command", required=True, metavar="CMD")

    listing = actions.add_parser("list", help="sessions, newest first")
    listing.add_argument("--limit", type=int, default=20)
    listing.add_argument("--cursor", help="next_cursor of a previous page")
    _common(listing)
    listing.set_defaults(run=lambda args: asyncio.run(_list(args)))

    show = actions.add_parser("show", help="a session's messages on its active path")
    show.add_argument("session_id")
    _common(show)
    show.set_defaults(run=lambda args: asyncio.run(_show(args)))

    fork = actions.add_parser("fork", help="a new session sharing history up to an entry")
    fork.add_argument("session_id")
    fork.add_argument("entry_id", help="the last entry the fork keeps (see `sessions show`)")
    _common(fork)
    fork.set_defaults(run=lambda args: asyncio.run(_fork(args)))
    add_curate_parsers(actions, common=_common)

    delete = actions.add_parser(
        "delete", help="delete a session (its entries and inboxes); the audit log records it"
    )
    delete.add_argument("session_id")
    delete.add_argument(
        "--cascade", action="store_true", help="delete its forks and clones too (else refused)"
    )
    _common(delete)
    delete.set_defaults(run=lambda args: asyncio.run(_delete(args)))

    title = actions.add_parser("title", help="set a session's title (one line)")
    title.add_argument("session_id")
    title.add_argument("title")
    _common(title)
    title.set_defaults(run=lambda args: asyncio.run(_title(args)))


def _common(parser: argparse.ArgumentParser) -> None:
    add_config(parser, json="print the raw reply as JSON")


async def _list(args: argparse.Namespace) -> int:
    request = request_for(LIST, limit=args.limit, order="desc", cursor=args.cursor or None)
    async with bus(load_config(args.config), read_only=True) as caller:
        reply = await LIST.call(caller, request)
        counts = {
            session.session_id: await _path_length(caller, session.session_id)
            for session in reply.sessions
            if session.origin is not None
        }
    if args.json:
        print_json(LIST.dump_response(reply))
        return 0
    for session in reply.sessions:
        created = _when(session.created_at)
        count = counts.get(session.session_id, session.entry_count)
        title = session.title or session.display_name
        line = f"{session.session_id:<36} {created}  {count:>4} entries"
        print(f"{line}  {_one_line(title)}" if title else line)
    if reply.next_cursor:
        print(f"(more: --cursor {reply.next_cursor})")
    return 0


async def _path_length(caller: Caller, session_id: str) -> int:
    """The entries on a fork's active path: the history it shares, then its own."""
    reply = await MESSAGES.call(caller, request_for(MESSAGES, session_id=session_id))
    return len(reply.messages)


def _one_line(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


async def _show(args: argparse.Namespace) -> int:
    request = request_for(MESSAGES, session_id=args.session_id)
    async with bus(load_config(args.config), read_only=True) as caller:
        reply = await MESSAGES.call(caller, request)
    if args.json:
        print_json(MESSAGES.dump_response(reply))
        return 0
    pinned = set(reply.pinned)
    for item in reply.messages:
        text = summary(item.message.model_dump(mode="json"))
        print(entry_line(item, text, pinned=item.entry_id in pinned))
    return 0


async def _fork(args: argparse.Namespace) -> int:
    request = request_for(FORK, source_session_id=args.session_id, from_entry_id=args.entry_id)
    async with bus(load_config(args.config)) as caller:
        reply = await FORK.call(caller, request)
    if args.json:
        print_json(FORK.dump_response(reply))
    else:
        print(reply.session_id)
    return 0


async def _delete(args: argparse.Namespace) -> int:
    request = request_for(
        DELETE, session_id=args.session_id, requested_by=local_user(), cascade=args.cascade
    )
    async with bus(load_config(args.config), ("engine", "sessions", "audit")) as caller:
        reply = await DELETE.call(caller, request)
    if args.json:
        print_json(DELETE.dump_response(reply))
    else:
        forks = f", and {', '.join(reply.cascaded)} with it" if reply.cascaded else ""
        print(
            f"deleted {reply.session_id}: {reply.entries} entries, {reply.inboxes} inboxes{forks}"
            " (recorded in the audit log)"
        )
    return 0


async def _title(args: argparse.Namespace) -> int:
    request = request_for(SET_TITLE, session_id=args.session_id, title=args.title)
    async with bus(load_config(args.config), ("engine", "sessions")) as caller:
        reply = await SET_TITLE.call(caller, request)
    if args.json:
        print_json(SET_TITLE.dump_response(reply))
    else:
        print(f"{reply.session_id}: {reply.title}")
    return 0


def local_user() -> str:
    """``local:<OS user>`` (``local:uid<N>`` for an account with no name), as ``tackroom run``
    names the principal."""
    try:
        return f"local:{getpass.getuser()}"
    except (KeyError, OSError):
        return f"local:uid{os.getuid()}"


def _when(value: Any) -> str:
    if isinstance(value, int | float):
        return datetime.fromtimestamp(value, UTC).strftime("%Y-%m-%d %H:%M:%S")
    return str(value or "")
