"""``tackroom``: serve a harness, run one worker, call functions, list the catalog, run the demo.

Exit codes: 0 success; 1 a call or the host failed (typed engine error, crashed worker);
2 a usage or config problem; 130 interrupted.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version

from tackroom.cli import approvals, auth, budget, call, demo, models, run, serve, sessions
from tackroom.engine.errors import EngineError
from tackroom.engine.factory import UnsupportedEngineURL
from tackroom.runtime.errors import (
    ConfigError,
    HarnessError,
    UnknownWorker,
    WorkerLoadError,
)

__all__ = ["build_parser", "main"]

_USAGE_ERRORS = (ConfigError, UnknownWorker, WorkerLoadError, UnsupportedEngineURL)


def _version() -> str:
    try:
        return version("tackroom")
    except PackageNotFoundError:
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tackroom",
        description="An agent harness where every job is a replaceable worker on one engine bus.",
    )
    parser.add_argument("--version", action="version", version=f"tackroom {_version()}")
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="log more (-v info, -vv debug)"
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve.add_parsers(commands)
    call.add_parsers(commands)
    demo.add_parsers(commands)
    run.add_parsers(commands)
    sessions.add_parsers(commands)
    auth.add_parsers(commands)
    models.add_parsers(commands)
    approvals.add_parsers(commands)
    budget.add_parsers(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    level = {0: logging.WARNING, 1: logging.INFO}.get(args.verbose, logging.DEBUG)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    try:
        code: int = args.run(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `tackroom ... | head`: the reader left; exit quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except _USAGE_ERRORS as exc:
        print(f"tackroom: error: {exc}", file=sys.stderr)
        return 2
    except (HarnessError, EngineError) as exc:
        print(f"tackroom: error: {exc}", file=sys.stderr)
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
