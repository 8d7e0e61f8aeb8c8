"""``tackroom demo``: a self-contained tour of the engine in a temporary directory."""

from __future__ import annotations

import argparse
import asyncio

__all__ = ["add_parsers"]


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    demo = commands.add_parser("demo", help="a short, self-contained engine demo")
    demo.set_defaults(run=_run_demo)


def _run_demo(args: argparse.Namespace) -> int:
    from tackroom.demo import run_demo

    return asyncio.run(run_demo())
