"""``tackroom tasks run|status|graph|list|cancel|pause|resume|rerun``: declarative task graphs.

``run`` checks the file first (a problem names its line and nothing starts), then boots the
agent workers (the config's, with ``tasks``) and follows the run to its end, printing each step
as it moves; when a ``tackroom serve`` owns the engine it starts the run there. ``resume``
follows a paused or interrupted run the same way. ``status`` only reads. Exit codes: 0 the run
succeeded (or the command did its job); 1 the run failed or was cancelled, or no such run; 2 a
bad graph, input or option; 3 the run waits for an approval (``tackroom approve``, then
``tackroom tasks resume RUN``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tackroom.cli._bus import Caller, bus
from tackroom.cli._options import add_config, print_json
from tackroom.contracts import tasks as c
from tackroom.contracts.approvals import DECISIONS_SCOPE, call_key
from tackroom.contracts.bus import Function, Req, Resp
from tackroom.contracts.engine import STATE_GET, StateGetRequest
from tackroom.engine.errors import FunctionNotFound, InvocationError
from tackroom.harness.tasks import mermaid, tree
from tackroom.harness.terminal import clip
from tackroom.harness.wiring import agent_host_config, agent_workers, parse_model
from tackroom.kit.taskgraph import GraphError, load_graph
from tackroom.kit.taskgraph.inputs import merged_inputs
from tackroom.runtime.config import HarnessConfig, load_config

__all__ = ["add_parsers"]


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    tasks = commands.add_parser("tasks", help="run and steer declarative task graphs")
    actions = tasks.add_subparsers(dest="tasks_command", required=True, metavar="CMD")

    run = actions.add_parser("run", help="run a tasks.yaml and follow it to its end")
    run.add_argument("file", type=Path, metavar="FILE")
    run.add_argument(
        "--input", action="append", default=[], metavar="K=V", help="a graph input (repeatable)"
    )
    run.add_argument("--run-id", help="the run's id (a known id resumes that run)")
    _steps_command(run, _run, detach="start it and return")

    graph = actions.add_parser("graph", help="draw a tasks.yaml (terminal tree or Mermaid)")
    graph.add_argument("file", type=Path, metavar="FILE")
    graph.add_argument("--format", choices=["tree", "mermaid"], default="tree")
    graph.set_defaults(run=_graph)

    status = actions.add_parser("status", help="where a run stands, step by step")
    status.add_argument("run_id", metavar="RUN")
    _command(status, _status)

    listing = actions.add_parser("list", help="task runs, oldest first")
    listing.add_argument(
        "--status", choices=["running", "paused", "cancelled", "succeeded", "failed"]
    )
    _command(listing, _list)

    for verb, text in (
        ("cancel", "cancel a run (steps under way finish; nothing new starts)"),
        ("pause", "pause a run (steps under way finish; nothing new starts until resume)"),
    ):
        control = actions.add_parser(verb, help=text)
        control.add_argument("run_id", metavar="RUN")
        _command(control, _control, verb=verb)

    resume = actions.add_parser("resume", help="resume a paused or interrupted run; follow it")
    resume.add_argument("run_id", metavar="RUN")
    _steps_command(resume, _resume, detach="resume it and return")

    rerun = actions.add_parser("rerun", help="run a step and every step after it again")
    rerun.add_argument("run_id", metavar="RUN")
    rerun.add_argument("step", metavar="STEP")
    _steps_command(rerun, _rerun, detach="start it and return")


def _command(parser: argparse.ArgumentParser, command: Any, **defaults: Any) -> None:
    """``--json`` and ``--config``; the parser runs ``command`` (see :func:`_sync`)."""
    add_config(parser, json="print the run record as JSON")
    parser.set_defaults(run=_sync(command), **defaults)


def _steps_command(parser: argparse.ArgumentParser, command: Any, *, detach: str) -> None:
    """A command that sets steps going and follows them: ``--model``, ``--detach`` (``detach``
    its help), then as :func:`_command`."""
    parser.add_argument("--model", help="PROVIDER:MODEL for agent steps that name none")
    parser.add_argument("--detach", action="store_true", help=detach)
    _command(parser, command)


def _sync(command: Any) -> Any:
    def run(args: argparse.Namespace) -> int:
        try:
            code: int = asyncio.run(command(args))
        except (GraphError, ValueError) as exc:
            print(f"tackroom: error: {exc}", file=sys.stderr)
            return 2
        except FunctionNotFound as exc:
            print(
                f"tackroom: error: {exc} (is `tasks` in the harness's boot list?)", file=sys.stderr
            )
            return 1
        except InvocationError as exc:
            print(f"tackroom: error: {exc}", file=sys.stderr)
            return 2 if exc.remote_code in (c.GRAPH_ERROR, c.INPUTS_ERROR) else 1
        return code

    return run


def parse_inputs(pairs: list[str]) -> dict[str, Any]:
    """``k=v`` pairs; a value that reads as JSON (``3``, ``true``, ``[1,2]``) is that value."""
    inputs: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--input {pair!r}: write it as NAME=VALUE")
        try:
            inputs[key] = json.loads(value)
        except ValueError:
            inputs[key] = value
    return inputs


def _executing(config: HarnessConfig, model: str | None) -> HarnessConfig:
    """The boot list of a command that runs steps: the agent workers (and a model's provider)."""
    if model:
        return agent_host_config(config, provider=parse_model(model).provider)
    return config.model_copy(update={"workers": agent_workers(config, provider_worker_name=None)})


def _controlling(config: HarnessConfig) -> HarnessConfig:
    """``engine`` and ``tasks`` serving tasks::* only: steering a run must not run its steps."""
    sections = dict(config.worker_config)
    sections["tasks"] = {**(sections.get("tasks") or {}), "execute": False}
    return config.model_copy(update={"worker_config": sections, "workers": ["engine", "tasks"]})


async def _run(args: argparse.Namespace) -> int:
    graph = load_graph(args.file)
    inputs = parse_inputs(args.input)
    merged_inputs(graph, inputs)  # refused here, before anything boots
    config = load_config(args.config)
    model = args.model or graph.model or config.agent.model
    booted = _executing(config, model)
    async with bus(booted, booted.workers) as caller:
        request = c.TaskRunRequest(
            graph=graph, inputs=inputs, run_id=args.run_id, source=str(args.file), model=model
        )
        started = await c.RUN.call(caller, request)
        print(f"run {started.run_id} ({'started' if started.created else 'found'})", flush=True)
        if args.detach:
            return 0
        return await _follow(caller, started.run_id, as_json=args.json)


async def _resume(args: argparse.Namespace) -> int:
    request = c.ControlRequest(run_id=args.run_id)
    return await _again(args, c.RESUME, request, lambda reply: reply.status)


async def _rerun(args: argparse.Namespace) -> int:
    request = c.RerunRequest(run_id=args.run_id, step=args.step)
    return await _again(
        args, c.RERUN, request, lambda _: f"{args.step} and what follows it run again"
    )


async def _again(
    args: argparse.Namespace,
    function: Function[Req, Resp],
    request: Req,
    said: Callable[[Resp], str],
) -> int:
    """Boot the workers that run steps, set ``args.run_id`` going again with ``function`` (what
    it did printed), and follow it unless ``--detach``."""
    config = load_config(args.config)
    booted = _executing(config, args.model or config.agent.model)
    async with bus(booted, booted.workers) as caller:
        reply = await function.call(caller, request)
        print(f"run {args.run_id}: {said(reply)}", flush=True)
        if args.detach:
            return 0
        return await _follow(caller, args.run_id, as_json=args.json)


async def _control(args: argparse.Namespace) -> int:
    function = c.CANCEL if args.verb == "cancel" else c.PAUSE
    config = _controlling(load_config(args.config))
    async with bus(config, config.workers, shared_bus_workers=()) as caller:
        reply = await function.call(caller, c.ControlRequest(run_id=args.run_id))
    done = "" if reply.changed else " (unchanged)"
    print(f"run {args.run_id}: {reply.status}{done}")
    return 0


async def _read(caller: Caller, run_id: str) -> c.TaskRun | None:
    entry = await STATE_GET.call(caller, StateGetRequest(scope=c.RUNS_SCOPE.name, key=run_id))
    return None if entry is None else c.RUNS_SCOPE.parse(entry.value)


async def _status(args: argparse.Namespace) -> int:
    async with bus(load_config(args.config), ["engine"], read_only=True) as caller:
        run = await _read(caller, args.run_id)
    if run is None:
        print(f"tackroom: error: no task run {args.run_id!r}", file=sys.stderr)
        return 1
    if args.json:
        print_json(run.model_dump(mode="json"))
    else:
        print(render_status(run))
    return 0


async def _list(args: argparse.Namespace) -> int:
    async with bus(load_config(args.config), ["engine"], read_only=True) as caller:
        reply = await caller.trigger("state::list", {"scope": c.RUNS_SCOPE.name})
    runs = [c.RUNS_SCOPE.parse(item["value"]) for item in reply["items"]]
    runs = [r for r in runs if args.status is None or r.status == args.status]
    for run in sorted(runs, key=lambda r: r.created_at):
        print(f"{run.run_id:<40} {run.graph_name:<20} {run.status}")
    return 0


def _graph(args: argparse.Namespace) -> int:
    try:
        graph = load_graph(args.file)
    except GraphError as exc:
        print(f"tackroom: error: {exc}", file=sys.stderr)
        return 2
    print(mermaid(graph) if args.format == "mermaid" else tree(graph))
    return 0


async def _follow(caller: Caller, run_id: str, *, as_json: bool) -> int:
    seen: dict[str, str] = {}
    pause = 0.02
    while True:
        run = await _read(caller, run_id)
        if run is None:
            print(f"tackroom: error: no task run {run_id!r}", file=sys.stderr)
            return 1
        for line in progress(run, seen):
            print(line, flush=True)
        if run.terminal or run.status == "paused" or await _undecided(caller, run):
            break
        await asyncio.sleep(pause)
        pause = min(pause * 1.5, 0.3)
    if as_json:
        print_json(run.model_dump(mode="json"))
    else:
        print(_ending(run))
    if _parked(run):
        return 3
    return 0 if run.status in ("succeeded", "paused") else 1


async def _undecided(caller: Caller, run: c.TaskRun) -> bool:
    """Parked, and no decision is written yet (a decided call wakes its step soon)."""
    if not _parked(run):
        return False
    for instance_id, instance in run.instances.items():
        if instance.status == "awaiting_approval":
            key = call_key(
                c.approval_session(run.run_id), c.approval_call_id(instance_id, instance.epoch)
            )
            found = await STATE_GET.call(
                caller, StateGetRequest(scope=DECISIONS_SCOPE.name, key=key)
            )
            if found is not None:
                return False
    return True


def _parked(run: c.TaskRun) -> bool:
    """Nothing can move without a person: every step under way waits for an approval."""
    waiting = [i.status for i in run.instances.values() if i.status in c.ACTIVE_INSTANCE]
    return run.status == "running" and bool(waiting) and set(waiting) == {"awaiting_approval"}


def progress(run: c.TaskRun, seen: dict[str, str]) -> list[str]:
    """A line per step instance whose state changed since ``seen`` (updated)."""
    lines = []
    for instance_id, instance in run.instances.items():
        state = f"{instance.status}/{instance.attempt}"
        if seen.get(instance_id) == state:
            continue
        seen[instance_id] = state
        lines.append(f"  {instance_id:<24} {_shown(run, instance_id, instance)}")
    for step_id, record in run.steps.items():
        if record.status == "skipped" and seen.get(step_id) != "skipped":
            seen[step_id] = "skipped"
            lines.append(f"  {step_id:<24} skipped: {record.reason}")
    return lines


def _shown(run: c.TaskRun, instance_id: str, instance: c.Instance) -> str:
    text: str = instance.status
    if instance.attempt > 1:
        text += f" (attempt {instance.attempt})"
    if instance.status == "awaiting_approval":
        call = c.approval_call_id(instance_id, instance.epoch)
        text += f": tackroom approve {c.approval_session(run.run_id)} {call}"
    elif instance.error and instance.status != "succeeded":
        text += f": {clip(instance.error, 160)}"
    return text


def _ending(run: c.TaskRun) -> str:
    if run.status == "succeeded":
        return f"run {run.run_id} succeeded\n" + json.dumps(
            run.outputs, indent=2, ensure_ascii=False
        )
    if run.status == "paused":
        return f"run {run.run_id} paused: tackroom tasks resume {run.run_id}"
    if _parked(run):
        return (
            f"run {run.run_id} waits for approval (above); once decided:"
            f" tackroom tasks resume {run.run_id}"
        )
    return f"run {run.run_id} {run.status}: {run.error or ''}".rstrip(": ")


def render_status(run: c.TaskRun) -> str:
    lines = [f"run {run.run_id} ({run.graph_name}): {run.status}"]
    if run.error:
        lines.append(f"  error: {clip(run.error, 300)}")
    for step_id, record in run.steps.items():
        count = f" x{record.count}" if record.count is not None else ""
        lines.append(
            f"  {step_id}{count}: {record.status}"
            + (f" — {record.reason}" if record.reason else "")
        )
        ids = [step_id] if record.count is None else [f"{step_id}.{i}" for i in range(record.count)]
        for instance_id in ids:
            instance = run.instances.get(instance_id)
            if instance is not None and (
                record.count is not None or instance.attempt > 1 or instance.error
            ):
                lines.append(f"    {instance_id}: {_shown(run, instance_id, instance)}")
    if run.outputs is not None:
        lines.append("  outputs: " + clip(json.dumps(run.outputs, ensure_ascii=False), 500))
    return "\n".join(lines)
