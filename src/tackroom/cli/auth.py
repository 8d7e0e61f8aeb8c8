"""``tackroom auth set|status|delete``: provider API tokens in the credentials vault.

The ``credentials`` worker runs in this process on a throwaway in-memory engine (the vault is a
file, so no harness needs to be running, and a running one sees the change at its next call);
its config section (``worker_config.credentials``) comes from the config file. ``set`` reads the
token from the terminal without echo, or from the first line of stdin when it is piped, never
from the command line (which other users can see in the process list and the shell history).
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import sys

from tackroom.cli._options import add_config
from tackroom.contracts.bus import Function, Req, Resp
from tackroom.contracts.credentials import (
    AUTH_DELETE_TOKEN,
    AUTH_SET_TOKEN,
    AUTH_STATUS,
)
from tackroom.engine.factory import open_engine
from tackroom.runtime.config import HarnessConfig, load_config
from tackroom.runtime.host import Host
from tackroom.runtime.registry import load_worker
from tackroom.runtime.typed import request_for

__all__ = ["add_parsers", "call_credentials"]

_MEMORY_URL = "embedded::memory:"


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    auth = commands.add_parser("auth", help="store, check and delete provider API tokens")
    actions = auth.add_subparsers(dest="auth_command", required=True, metavar="CMD")

    setter = actions.add_parser("set", help="store a provider's token (read from the terminal)")
    setter.add_argument("provider", help="e.g. openai, anthropic, deepseek, moonshot")
    add_config(setter)
    setter.set_defaults(run=_set)

    status = actions.add_parser("status", help="which providers have a token, and from where")
    status.add_argument("provider", nargs="?", help="one provider (default: all known)")
    add_config(status, json="print the raw reply as JSON")
    status.set_defaults(run=_status)

    delete = actions.add_parser("delete", help="remove a provider's token from the vault")
    delete.add_argument("provider")
    add_config(delete)
    delete.set_defaults(run=_delete)


async def call_credentials(
    config: HarnessConfig, function: Function[Req, Resp], request: Req
) -> Resp:
    """Call one credentials function on an in-process credentials worker."""
    host = Host(
        engine=open_engine(_MEMORY_URL), workers=[load_worker("credentials")], config=config
    )
    async with host:
        return await function.call(host.engine, request)


def _read_token(provider: str) -> str:
    if sys.stdin.isatty():
        return getpass.getpass(f"token for {provider}: ")
    return sys.stdin.readline()


def _set(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    token = _read_token(args.provider).strip()
    if not token:
        print("tackroom: error: no token given (type it, or pipe it on stdin)", file=sys.stderr)
        return 2
    request = request_for(AUTH_SET_TOKEN, provider=args.provider, token=token)
    reply = asyncio.run(call_credentials(config, AUTH_SET_TOKEN, request))
    print(f"stored a token for {reply.provider} ({reply.fingerprint})")
    return 0


def _status(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    request = request_for(AUTH_STATUS, provider=args.provider or None)
    reply = asyncio.run(call_credentials(config, AUTH_STATUS, request))
    if args.json:
        print(json.dumps(AUTH_STATUS.dump_response(reply), indent=2))
        return 0
    for name, entry in reply.providers.items():
        if entry.configured:
            where = "vault" if entry.source == "vault" else f"env {entry.env_var}"
            print(f"{name:<12} configured  {where:<28} {entry.fingerprint}")
        else:
            print(f"{name:<12} missing     (tackroom auth set {name}, or set {entry.env_var})")
    return 0


def _delete(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    request = request_for(AUTH_DELETE_TOKEN, provider=args.provider)
    reply = asyncio.run(call_credentials(config, AUTH_DELETE_TOKEN, request))
    if reply.deleted:
        print(f"deleted the stored token of {reply.provider}")
    else:
        print(f"the vault had no token for {reply.provider}")
    if reply.source == "env":
        print(f"note: {reply.provider} still has a token from the environment")
    return 0
