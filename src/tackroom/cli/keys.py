"""``tackroom keys create|list|revoke``: per-user API keys for the gateway.

A key stands for one user of one tenant with its roles. It is printed once, at creation; the
engine keeps only its hash (``tackroom.contracts.identity``), so every gateway on that engine
accepts it at once and refuses it within ``auth.api_key_cache_seconds`` of its revocation.
Exit codes: 0 done; 1 no such key; 2 a usage problem.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import time
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from tackroom.cli._bus import Caller, bus
from tackroom.cli._options import add_config
from tackroom.contracts.engine import (
    STATE_GET,
    STATE_LIST,
    STATE_SET,
    StateGetRequest,
    StateListRequest,
    StateSetRequest,
)
from tackroom.contracts.identity import API_KEYS, KEY_ID_PATTERN, ApiKeyRecord, mint_key
from tackroom.runtime.config import load_config

__all__ = ["add_parsers", "parse_duration"]

_WORKERS = ("engine",)
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    keys = commands.add_parser("keys", help="per-user API keys for the gateway")
    actions = keys.add_subparsers(dest="keys_command", required=True, metavar="CMD")

    create = _action(actions, "create", "a key for a user of a tenant (shown once)", _create)
    create.add_argument("--tenant", required=True, help="the tenant the key is confined to")
    create.add_argument("--user", required=True, help="the user it stands for")
    create.add_argument(
        "--role", action="append", default=[], metavar="ROLE", help="a role it holds (repeat)"
    )
    create.add_argument("--expires", metavar="DURATION", help="e.g. 90d, 12h (default: never)")
    create.add_argument("--label", help="a note to tell keys apart")

    listing = _action(actions, "list", "keys (never their secrets)", _list)
    listing.add_argument("--tenant", help="only this tenant's keys")

    revoke = _action(actions, "revoke", "stop a key working", _revoke)
    revoke.add_argument("key_id", metavar="KEY_ID", help="the 12 hex digits after tk_")


def _action(
    actions: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    text: str,
    run: Any,
) -> argparse.ArgumentParser:
    parser = actions.add_parser(name, help=text)
    add_config(parser, json="print JSON")
    parser.set_defaults(run=lambda args: asyncio.run(_run(args, run)))
    return parser


async def _run(args: argparse.Namespace, run: Any) -> int:
    async with bus(load_config(args.config), _WORKERS) as caller:
        code: int = await run(caller, args)
    return code


def parse_duration(text: str) -> float:
    """Seconds in ``90d``, ``12h``, ``30m``, ``2w`` or ``45s``."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*", text)
    if match is None or float(match.group(1)) <= 0:
        raise ValueError(f"--expires {text!r}: write a positive duration such as 90d, 12h or 30m")
    return float(match.group(1)) * _UNITS[match.group(2)]


def _usage_error(message: str) -> int:
    print(f"tackroom: error: {message}", file=sys.stderr)
    return 2


async def _create(caller: Caller, args: argparse.Namespace) -> int:
    now = time.time()
    try:
        expires = None if args.expires is None else now + parse_duration(args.expires)
        minted = mint_key(
            tenant=args.tenant,
            user=args.user,
            roles=tuple(args.role),
            now=now,
            expires_at=expires,
            label=args.label,
        )
    except ValueError as exc:
        return _usage_error(_one_line(exc))
    record = minted.record
    await _store(caller, record, revision=0)
    if args.json:
        shown = {"key": minted.text, **_shown(record)}
        print(json.dumps(shown, indent=2))
        return 0
    print(minted.text)
    print(
        f"# key {record.key_id} for {record.tenant}/{record.user} ({_roles(record)}),"
        f" {_expiry(record)}: shown this once, keep it secret",
        file=sys.stderr,
    )
    return 0


async def _list(caller: Caller, args: argparse.Namespace) -> int:
    listed = await STATE_LIST.call(caller, StateListRequest(scope=API_KEYS.name))
    records = [API_KEYS.parse(item.value) for item in listed.items]
    if args.tenant is not None:
        records = [r for r in records if r.tenant == args.tenant]
    records.sort(key=lambda r: (r.tenant, r.user, r.created_at))
    if args.json:
        print(json.dumps([_shown(r) for r in records], indent=2))
        return 0
    if not records:
        print("no API keys")
    for r in records:
        state = "revoked" if r.revoked_at is not None else _expiry(r)
        label = f"  {r.label}" if r.label else ""
        print(f"{r.key_id}  {r.tenant}/{r.user:<20} {_roles(r):<24} {state}{label}")
    return 0


async def _revoke(caller: Caller, args: argparse.Namespace) -> int:
    if not re.match(KEY_ID_PATTERN, args.key_id):
        return _usage_error(f"{args.key_id!r} is no key id: 12 hex digits, as keys list shows")
    found = await STATE_GET.call(caller, StateGetRequest(scope=API_KEYS.name, key=args.key_id))
    if found is None:
        print(f"tackroom: error: no API key {args.key_id}", file=sys.stderr)
        return 1
    record = API_KEYS.parse(found.value)
    if record.revoked_at is None:
        revoked = record.model_copy(update={"revoked_at": time.time()})
        await _store(caller, revoked, revision=found.revision)
    print(f"revoked {record.key_id} ({record.tenant}/{record.user})")
    return 0


async def _store(caller: Caller, record: ApiKeyRecord, *, revision: int) -> None:
    """Write ``record`` under its key id, if the stored one is still at ``revision`` (0: none)."""
    await STATE_SET.call(
        caller,
        StateSetRequest(
            scope=API_KEYS.name,
            key=record.key_id,
            value=API_KEYS.dump_value(record),
            expected_revision=revision,
        ),
    )


def _shown(record: ApiKeyRecord) -> dict[str, Any]:
    return record.model_dump(mode="json", exclude={"secret_sha256"})


def _roles(record: ApiKeyRecord) -> str:
    return ",".join(record.roles) or "no roles"


def _expiry(record: ApiKeyRecord) -> str:
    if record.expires_at is None:
        return "never expires"
    when = datetime.fromtimestamp(record.expires_at, UTC).strftime("%Y-%m-%d %H:%M UTC")
    return f"expires {when}" if record.expires_at > time.time() else f"expired {when}"


def _one_line(exc: ValueError) -> str:
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        field = str(first["loc"][0]) if first["loc"] else "key"
        if field == "tenant":
            return (
                "--tenant: 1-63 lower-case letters, digits, '_' or '-', starting with a letter"
                " or digit"
            )
        return f"--{field}: {first['msg']}"
    return str(exc)
