"""``tackroom demo``: an agent run on a scripted model (``--engine-tour``: the engine bus tour)."""

from __future__ import annotations

import argparse
import asyncio

__all__ = ["add_parsers"]


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    demo = commands.add_parser(
        "demo", help="a self-contained agent run on a scripted model (no API key needed)"
    )
    demo.add_argument(
        "--engine-tour", action="store_true", help="tour the engine bus instead of an agent run"
    )
    demo.set_defaults(run=_run_demo)


def _run_demo(args: argparse.Namespace) -> int:
    from tackroom.demo import run_agent_demo, run_demo

    return asyncio.run(run_demo() if args.engine_tour else run_agent_demo())
