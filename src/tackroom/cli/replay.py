"""``tackroom replay RUN`` and ``tackroom cassette export RUN -o FILE``.

``replay`` reads the cassette of a finished run (a run id or a session id, from the config's
engine; or a cassette file written by ``--export``), drives the run again offline — the recorded
provider and tools answer from the cassette, nothing reaches a model or has a side effect — and
says whether the replayed messages are the recorded ones byte for byte, or where they first
differ. Exit 0: identical; 1: diverged; 2: a usage problem.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from tackroom.cli._bus import bus
from tackroom.cli._options import add_config, print_json
from tackroom.contracts.cassette import Cassette, ReplayReport
from tackroom.harness.errors import UsageError
from tackroom.harness.replay import export_cassette, load_cassette, replay, save_cassette
from tackroom.runtime.config import HarnessConfig, load_config

__all__ = ["add_parsers"]


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    run = commands.add_parser(
        "replay", help="drive a finished run again from its cassette, offline, and compare"
    )
    run.add_argument(
        "target", metavar="RUN", help="a run id, a session id (its latest run) or a cassette file"
    )
    run.add_argument("--export", type=Path, metavar="FILE", help="also write the cassette here")
    run.add_argument(
        "--system-prompt-file",
        type=Path,
        metavar="FILE",
        help="replay with this system prompt instead of the recorded one",
    )
    run.add_argument("--system-prompt", help="the same, given inline")
    run.add_argument(
        "--live-model",
        metavar="PROVIDER:MODEL",
        help="a real model answers (tools still answer from the cassette); compares its run",
    )
    run.add_argument("--timeout", type=float, default=120.0, help="seconds the replay may take")
    add_config(run, json="print the report as JSON")
    run.set_defaults(run=lambda args: asyncio.run(_replay(args)))

    cassette = commands.add_parser("cassette", help="export a finished run's cassette")
    actions = cassette.add_subparsers(dest="cassette_command", required=True, metavar="CMD")
    export = actions.add_parser("export", help="write a run's cassette as JSON")
    export.add_argument("target", metavar="RUN", help="a run id or a session id (its latest run)")
    export.add_argument("-o", "--output", type=Path, required=True, metavar="FILE")
    add_config(export)
    export.set_defaults(run=lambda args: asyncio.run(_export(args)))


async def _cassette(run: str, config: HarnessConfig) -> Cassette:
    path = Path(run)
    if path.suffix == ".json" or await asyncio.to_thread(path.is_file):
        return load_cassette(path)
    async with bus(config, read_only=True) as caller:
        return await export_cassette(caller, run)


def _system_prompt(args: argparse.Namespace) -> str | None:
    if args.system_prompt_file is not None and args.system_prompt is not None:
        raise UsageError("give --system-prompt or --system-prompt-file, not both")
    if args.system_prompt_file is None:
        return args.system_prompt  # type: ignore[no-any-return]
    try:
        return args.system_prompt_file.read_text(encoding="utf-8")  # type: ignore[no-any-return]
    except OSError as exc:
        raise UsageError(f"cannot read {args.system_prompt_file}: {exc.strerror or exc}") from None


async def _replay(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.config)
        prompt = _system_prompt(args)
        cassette = await _cassette(args.target, config)
        if args.export is not None:
            save_cassette(cassette, args.export)
        report = await replay(
            cassette,
            system_prompt=prompt,
            live_model=args.live_model,
            config=config,
            timeout=args.timeout,
        )
    except UsageError as exc:
        print(f"tackroom: error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print_json(report.model_dump(mode="json"))
    else:
        print(_summary(report, cassette))
    return 0 if report.identical else 1


def _summary(report: ReplayReport, cassette: Cassette) -> str:
    how = f"live: {report.live_model}" if report.live_model else "offline"
    lines = [
        f"replay of run {report.run_id} (session {report.session_id},"
        f" {cassette.provider}:{cassette.model}, {how}): {report.model_calls} model call(s),"
        f" {report.tool_calls} tool call(s) answered from the cassette,"
        f" {report.messages} message(s), {report.seconds:.3f}s",
    ]
    if report.divergence is None:
        same = "the same" if report.live_model else "byte for byte the recorded ones"
        lines.append(f"identical: the replayed messages are {same}")
    else:
        lines.append("DIVERGED: " + report.divergence.describe())
    if report.live_model and report.final_text:
        lines.append(f"{report.live_model} answered: {report.final_text}")
    return "\n".join(lines)


async def _export(args: argparse.Namespace) -> int:
    try:
        async with bus(load_config(args.config), read_only=True) as caller:
            cassette = await export_cassette(caller, args.target)
    except UsageError as exc:
        print(f"tackroom: error: {exc}", file=sys.stderr)
        return 2
    save_cassette(cassette, args.output)
    print(
        f"wrote {args.output}: run {cassette.run_id} of session {cassette.session_id},"
        f" {len(cassette.exchanges)} model call(s), {len(cassette.tool_calls)} tool call(s)"
    )
    return 0
