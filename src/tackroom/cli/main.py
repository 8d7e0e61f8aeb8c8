"""``tackroom``: serve a harness, run one worker, call functions, list the catalog, run the demo.

Exit codes: 0 success; 1 a call or the host failed (typed engine error, crashed worker);
2 a usage or config problem; 3 ``tackroom run`` waits for an approval with no terminal to ask on;
130 interrupted.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Sequence

from tackroom.cli import _startup

__all__ = ["build_parser", "main"]

COMMAND_MODULES: dict[str, str] = {
    "serve": "serve",
    "worker": "serve",
    "call": "call",
    "functions": "call",
    "workers": "call",
    "demo": "demo",
    "run": "run",
    "chat": "chat",
    "sessions": "sessions",
    "auth": "auth",
    "models": "models",
    "approve": "approvals",
    "deny": "approvals",
    "approvals": "approvals",
    "budget": "budget",
    "traces": "traces",
    "replay": "replay",
    "cassette": "replay",
    "tasks": "tasks",
    "audit": "audit",
    "runs": "runs",
    "nats": "nats",
    "keys": "keys",
    "schema": "schema",
    "contracts": "contracts",
}
"""Which ``tackroom.cli`` module defines each command. Only the one being run is imported, so
``tackroom run`` does not pay for the approvals or budget commands' imports."""


class _Version(argparse.Action):
    """``--version``: ``tackroom._version``, the build's own source of it."""

    def __call__(self, parser: argparse.ArgumentParser, *_: object, **__: object) -> None:
        from tackroom._version import __version__

        parser.exit(message=f"tackroom {__version__}\n")


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser; with ``argv`` naming a command, only that command's module is imported."""
    parser = argparse.ArgumentParser(
        prog="tackroom",
        description="An agent harness where every job is a replaceable worker on one engine bus.",
    )
    parser.add_argument("--version", action=_Version, nargs=0, help="print the version and exit")
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="log more (-v info, -vv debug)"
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    named = next((arg for arg in argv or () if not arg.startswith("-")), None)
    wanted = [COMMAND_MODULES[named]] if named in COMMAND_MODULES else COMMAND_MODULES.values()
    for module in dict.fromkeys(wanted):
        importlib.import_module(f"tackroom.cli.{module}").add_parsers(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``argv`` (default: the process's command line, which starts without the garbage
    collector until the command is up: :mod:`tackroom.cli._startup`)."""
    if argv is None:
        _startup.hold()
    try:
        return _main(sys.argv[1:] if argv is None else list(argv))
    finally:
        _startup.started()


def _main(arguments: list[str]) -> int:
    # Imported here, once main() holds the collector: they bring the engine and the runtime.
    from tackroom.engine.errors import EngineError
    from tackroom.engine.factory import UnsupportedEngineURL
    from tackroom.extras import MissingExtra
    from tackroom.runtime.errors import ConfigError, HarnessError, UnknownWorker, WorkerLoadError

    usage_errors = (ConfigError, UnknownWorker, WorkerLoadError, UnsupportedEngineURL, MissingExtra)
    parser = build_parser(arguments)
    args = parser.parse_args(arguments)
    level = {0: logging.WARNING, 1: logging.INFO}.get(args.verbose, logging.DEBUG)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    try:
        code: int = args.run(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `tackroom ... | head`: the reader left; exit quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except usage_errors as exc:
        print(f"tackroom: error: {exc}", file=sys.stderr)
        return 2
    except (HarnessError, EngineError) as exc:
        print(f"tackroom: error: {exc}", file=sys.stderr)
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
