"""What the ``tackroom`` commands share: their common options, and how they print JSON."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

__all__ = ["add_config", "print_json"]


def add_config(parser: argparse.ArgumentParser, *, json: str | None = None) -> None:
    """``--config FILE`` (the harness config the command reads); with ``json``, a ``--json`` flag
    before it, ``json`` its help (what it prints as JSON)."""
    if json is not None:
        parser.add_argument("--json", action="store_true", help=json)
    parser.add_argument("--config", type=Path, help="config file (default: ./tackroom.yaml)")


def print_json(value: Any) -> None:
    """``value`` (JSON-shaped data) on stdout, indented, non-ASCII as it is."""
    print(json.dumps(value, indent=2, ensure_ascii=False))
