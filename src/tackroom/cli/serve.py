"""``tackroom serve`` (the boot list) and ``tackroom worker run NAME`` (one worker).

``serve`` boots the ``workers:`` list of ``tackroom.yaml`` when the file has one; without one it
boots what ``tackroom run`` boots — the agent workers and the worker of ``agent.model``'s
provider — so runs can be started, followed, aborted and resumed through its endpoint, and the
``gateway`` (HTTP and the web console; ``worker_config.gateway.enabled: false`` leaves it out).
``--agent`` adds the agent workers and the gateway to an explicit list.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import signal
import sys

from tackroom.cli import _startup
from tackroom.cli._options import add_config
from tackroom.cli.install import add_worker_parsers
from tackroom.harness.wiring import (
    agent_workers,
    fallback_providers,
    gateway_host_config,
    provider_worker_for,
    served_config,
)
from tackroom.runtime.config import HarnessConfig, load_config
from tackroom.runtime.errors import ConfigError
from tackroom.runtime.host import Host

__all__ = ["add_parsers"]


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = commands.add_parser(
        "serve",
        help="host the config's boot list (and the local endpoint on an embedded engine)",
    )
    _host_options(serve)
    serve.add_argument(
        "--agent",
        action="store_true",
        help="also boot the agent workers when the config lists its own workers",
    )
    serve.set_defaults(run=_run_serve)

    worker = commands.add_parser("worker", help="worker commands")
    worker_commands = worker.add_subparsers(dest="worker_command", required=True, metavar="CMD")
    run = worker_commands.add_parser("run", help="host one worker on the engine")
    run.add_argument("name", help="the worker's name (an entry point of tackroom.workers)")
    _host_options(run)
    run.set_defaults(run=_run_worker)
    add_worker_parsers(worker_commands)


ENGINE_ENV = "TACKROOM_ENGINE"
WORKER_CONFIG_ENV = "TACKROOM_WORKER_CONFIG"


def _host_options(parser: argparse.ArgumentParser) -> None:
    add_config(parser)
    parser.add_argument("--engine", help="engine URL, overriding the config's engine:")


def _run_serve(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    workers = serve_workers(config, agent=args.agent)
    host = Host.from_config(
        served_config(config, workers),
        workers=workers,
        engine_url=args.engine,
        serve_endpoint=True,
    )
    return asyncio.run(_host_until_signalled(host))


def serve_workers(config: HarnessConfig, *, agent: bool = False) -> list[str]:
    """The config's own ``workers:`` list; without one (or with ``agent``), the agent's and the
    gateway (unless ``worker_config.gateway.enabled`` is false)."""
    if "workers" in config.model_fields_set and not agent:
        return list(config.workers)
    provider: str | None = None
    model = config.agent.model
    if model and ":" in model:
        name = model.partition(":")[0]
        section = config.worker_config.get("scripted") or {}
        if name != "scripted" or section.get("script") or section.get("script_path"):
            provider = provider_worker_for(name, config.worker_config)
    workers = agent_workers(
        config, provider_worker_name=provider, more_providers=fallback_providers(config)
    )
    if _wants_gateway(config):
        workers.append(_GATEWAY)
    return list(dict.fromkeys(workers))


_GATEWAY = "gateway"
_GATEWAY_MODULES = ("starlette", "uvicorn", "sse_starlette")


def _wants_gateway(config: HarnessConfig) -> bool:
    """Unless ``enabled: false``; without the ``gateway`` extra, only when asked for by name."""
    section = config.worker_config.get(_GATEWAY) or {}
    enabled = section.get("enabled")
    if enabled is False:
        return False
    if enabled is None and not all(importlib.util.find_spec(m) for m in _GATEWAY_MODULES):
        print(
            "tackroom serve: no gateway (pip install 'tackroom[gateway]' for HTTP and the web"
            " console)",
            file=sys.stderr,
        )
        return False
    return True


def _run_worker(args: argparse.Namespace) -> int:
    """``TACKROOM_ENGINE`` and ``TACKROOM_WORKER_CONFIG`` (the worker's section as JSON), when
    set, stand for ``--engine`` and the config's section: how ``tackroom contracts check`` starts
    a worker in any language."""
    config = load_config(args.config)
    section = os.environ.get(WORKER_CONFIG_ENV)
    if section is not None:
        try:
            value = json.loads(section)
        except json.JSONDecodeError as exc:
            raise ConfigError(None, f"{WORKER_CONFIG_ENV} is not JSON: {exc}") from None
        if not isinstance(value, dict):
            raise ConfigError(None, f"{WORKER_CONFIG_ENV} must be a JSON object")
        sections = {**config.worker_config, args.name: value}
        config = config.model_copy(update={"worker_config": sections})
    if args.name == _GATEWAY:
        config = gateway_host_config(config)
    engine_url = args.engine or os.environ.get(ENGINE_ENV) or None
    host = Host.from_config(config, workers=[args.name], engine_url=engine_url)
    return asyncio.run(_host_until_signalled(host))


async def _host_until_signalled(host: Host) -> int:
    loop = asyncio.get_running_loop()
    signals = (signal.SIGINT, signal.SIGTERM)
    for signum in signals:
        loop.add_signal_handler(signum, host.request_stop)
    try:
        async with host:
            _startup.started()
            ready = ["tackroom ready"]
            if host.endpoint is not None:
                ready.append(f"socket={host.endpoint.path}")
            ready.append(f"workers={','.join(host.worker_names)}")
            print(" ".join(ready), flush=True)
            for line in host.announcements:
                print(line, flush=True)
            await host.wait()
    finally:
        for signum in signals:
            loop.remove_signal_handler(signum)
    print("tackroom stopped", file=sys.stderr, flush=True)
    return 0
