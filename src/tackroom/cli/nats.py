"""``tackroom nats config``: the nats-server authorization of one namespace, with new passwords.

Writes the config fragment (to include in ``nats-server.conf``) to a new file only its owner may
read (0600), and prints each user's engine URL — with its password, shown this once. Nothing here
talks to a server. See "Securing the bus" in ``docs/nats.md``. The generator lives in the NATS
backend's package, which needs the ``nats`` extra: it is imported only when the command runs, so
``tackroom --help`` works without it.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from tackroom.extras import missing_extra

__all__ = ["add_parsers", "write_private"]


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    group = commands.add_parser("nats", help="NATS backend tools (server authorization)")
    actions = group.add_subparsers(dest="nats_command", required=True, metavar="CMD")
    config = actions.add_parser(
        "config",
        help="write a nats-server authorization fragment for a namespace, with new passwords",
        description="Write the users and permissions of one namespace as a nats-server config"
        " fragment (a new 0600 file), and print each user's engine URL once.",
    )
    config.add_argument(
        "--user",
        dest="users",
        action="append",
        default=[],
        metavar="NAME:ROLE[:TOOL[,TOOL...]]",
        help="a user: ROLE harness (the trusted workers) or tool (serves tool::TOOL only;"
        " TOOL defaults to NAME); repeat for more users",
    )
    config.add_argument(
        "--grants",
        type=Path,
        metavar="TACKROOM_YAML",
        help="also a tool user for each worker of this config's worker_grants (the table the"
        " embedded bus confines them by)",
    )
    config.add_argument("--namespace", default="tackroom", help="default: %(default)s")
    config.add_argument(
        "--account",
        help="put the users in an account of this name with JetStream of its own (confines"
        " the harness's JetStream API to it); default: the server's global account",
    )
    config.add_argument(
        "--server",
        default="nats://127.0.0.1:4222",
        help="host:port the printed URLs name (default: %(default)s)",
    )
    config.add_argument(
        "--out", type=Path, required=True, help="the fragment file to write (mode 0600)"
    )
    config.add_argument("--force", action="store_true", help="overwrite --out if it exists")
    config.set_defaults(run=_config)


def _config(args: argparse.Namespace) -> int:
    try:
        from tackroom.engine.nats import permissions as perms
    except ModuleNotFoundError as exc:
        problem = missing_extra(exc, needed_by="`tackroom nats config`")
        if problem is None:
            raise
        raise problem from exc
    specs = list(args.users)
    if args.grants is not None:
        from tackroom.runtime.config import load_config

        grants = load_config(args.grants).worker_grants
        specs += [f"{name}:tool:{','.join(grant.tools)}" for name, grant in sorted(grants.items())]
    if not specs:
        print("tackroom: error: name a user (--user NAME:ROLE) or --grants FILE", file=sys.stderr)
        return 2
    try:
        users = []
        for spec in specs:
            name, role, tools = perms.parse_user_spec(spec)
            password = perms.new_password()
            users.append(perms.BusUser(name=name, role=role, password=password, tools=tools))
        text = perms.render_config(args.namespace, users, account=args.account)
        urls = [(user, perms.engine_url(args.server, args.namespace, user)) for user in users]
    except ValueError as exc:
        print(f"tackroom: error: {exc}", file=sys.stderr)
        return 2
    try:
        write_private(args.out, text, overwrite=args.force)
    except FileExistsError:
        print(f"tackroom: error: {args.out} exists (--force overwrites it)", file=sys.stderr)
        return 2
    print(f"wrote {args.out} (mode 0600): include it in nats-server.conf, then reload the server")
    print("engine URLs (they hold the passwords, shown only now):")
    for user, url in urls:
        print(f"  {user.name} ({user.role}): {url}")
    return 0


def write_private(path: Path, text: str, *, overwrite: bool = False) -> None:
    """Write ``text`` to ``path`` readable by its owner only (0600, also when overwriting);
    ``FileExistsError`` if it exists and not ``overwrite``."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if overwrite else os.O_EXCL)
    fd = os.open(path, flags, 0o600)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            fd = -1
            out.write(text)
    finally:
        if fd != -1:
            os.close(fd)
