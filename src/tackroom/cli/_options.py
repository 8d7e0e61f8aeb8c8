"""What the ``tackroom`` commands share: their common options, and how they print JSON."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

__all__ = ["add_config", "add_principal", "print_json"]


def add_config(parser: argparse.ArgumentParser, *, json: str | None = None) -> None:
    """``--config FILE`` (the harness config the command reads); with ``json``, a ``--json`` flag
    before it, ``json`` its help (what it prints as JSON)."""
    if json is not None:
        parser.add_argument("--json", action="store_true", help=json)
    parser.add_argument("--config", type=Path, help="config file (default: ./tackroom.yaml)")


def add_principal(parser: argparse.ArgumentParser, *, who: str, roles: str) -> None:
    """``--as ID`` (``args.principal``; ``who`` its help) and the repeatable ``--role ROLE``
    (``args.roles``; ``roles`` says what they are checked against)."""
    parser.add_argument("--as", dest="principal", metavar="ID", help=who)
    parser.add_argument(
        "--role",
        dest="roles",
        action="append",
        default=[],
        metavar="ROLE",
        help=f"a role of --as (repeatable): {roles}",
    )


def print_json(value: Any) -> None:
    """``value`` (JSON-shaped data) on stdout, indented, non-ASCII as it is."""
    print(json.dumps(value, indent=2, ensure_ascii=False))
