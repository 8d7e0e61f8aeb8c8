"""The governance scenario of ``examples/governance/``, booted in process from its own files.

:func:`copy_example` copies the example to a short temporary folder (the endpoint's socket path
must fit in 107 bytes) and :func:`governed` boots what ``tackroom run`` boots from its
``tackroom.yaml`` (``agent_host_config``), with the scripted provider built in Python from one of
the example's scripts so a test can read the requests the model got. ``replicas`` boots more
``orchestrator`` workers on the same engine: queue deliveries and state-trigger wakes then land
on any of them.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import TracerProvider

from tackroom.cli.run import agent_host_config
from tackroom.contracts.messages import UserMessage
from tackroom.contracts.turn import (
    EVENTS_STREAM,
    RUN_START,
    TURN_ON_APPROVAL,
    TURN_STEP,
    RunStartRequest,
    RunStartResponse,
)
from tackroom.engine import Engine, Handler, Registration, open_engine
from tackroom.runtime import Host, WorkerSpec, load_worker
from tackroom.runtime.config import load_config
from tackroom.testing import Script, ScriptedProvider, wait_until
from tackroom.workers.orchestrator.record import TURNS_SCOPE, TurnRecord

__all__ = [
    "EXAMPLE",
    "SECRETS",
    "Governed",
    "copy_example",
    "events",
    "governed",
    "resolve",
    "turn_of",
    "wait_for_parked",
    "wait_for_terminal",
]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "governance"

SECRETS = (
    "sk-demo-FAKEc0ffee0123456789abcdef",
    "AKIAIOSFODNN7EXAMPLE",
    "tr0ub4dor-and-3",
)
"""The credentials in ``workspaces/redact-demo/config/deploy.env``: nothing may keep them."""


def copy_example(root: Path) -> Path:
    """A copy of the example under ``root`` without what a run left there (database, sessions)."""

    def leftovers(directory: str, names: list[str]) -> list[str]:
        skipped = [name for name in names if name == ".tackroom"]
        if Path(directory).name == "workspaces":
            skipped += [name for name in names if name != "redact-demo"]
        return skipped

    target = root / "gov"
    shutil.copytree(EXAMPLE, target, ignore=leftovers)
    return target


@dataclass
class Governed:
    """The harness of the example, booted in process."""

    host: Host
    provider: ScriptedProvider
    workdir: Path
    deliveries: dict[str, list[str]] = field(default_factory=dict)
    """Function id (``turn::step``, ``turn::on_approval``) → the workers that handled each call."""

    @property
    def engine(self) -> Engine:
        return self.host.engine

    async def start(
        self, session_id: str, text: str = "go", *, tools: list[str] | None = None
    ) -> RunStartResponse:
        """``run::start`` as ``tackroom run`` sends it (the example's model, tools, max turns)."""
        request = RunStartRequest(
            session_id=session_id,
            run_id=f"run-{session_id}",
            provider="scripted",
            model="demo",
            messages=[UserMessage.text(text)],
            tools=tools or ["fs::*", "calc::*", "clock::*"],
        )
        reply = RunStartResponse.model_validate(
            await self.engine.trigger(RUN_START, request.model_dump(mode="json"))
        )
        assert reply.started, reply.reason
        return reply

    async def run(
        self, session_id: str, text: str = "go", *, tools: list[str] | None = None
    ) -> TurnRecord:
        await self.start(session_id, text, tools=tools)
        return await wait_for_terminal(self.engine, session_id)


def _counting(engine: Engine, counted: Sequence[str], into: dict[str, list[str]]) -> None:
    """Record which worker handles each call of the ``counted`` function ids."""
    register = engine.register_function

    def counter(function_id: str, worker: str, inner: Handler) -> Handler:
        async def handler(payload: Any) -> Any:
            into.setdefault(function_id, []).append(worker)
            return await inner(payload)

        return handler

    async def register_function(function_id: str, handler: Handler, **options: Any) -> Registration:
        if function_id in counted:
            handler = counter(function_id, str(options.get("worker", "?")), handler)
        return await register(function_id, handler, **options)

    setattr(engine, "register_function", register_function)  # noqa: B010


@asynccontextmanager
async def governed(
    workdir: Path,
    script: str | Script,
    *,
    sections: Mapping[str, Mapping[str, Any]] | None = None,
    replicas: int = 1,
    extra: Sequence[WorkerSpec[Any]] = (),
    tracer_provider: TracerProvider | None = None,
    prepare: Callable[[Engine], None] | None = None,
) -> AsyncIterator[Governed]:
    """Boot the example in ``workdir`` (the working directory must be ``workdir``: the files
    worker and the policy read paths relative to it).

    ``script``: a file name under ``scripts/`` or a :class:`Script`; ``sections``: config keys
    merged over the example's ``worker_config``; ``replicas``: orchestrators on the one engine;
    ``extra``: more workers; ``prepare(engine)``: called before the host starts.
    """
    config = agent_host_config(load_config(workdir / "tackroom.yaml"), provider="scripted")
    merged: dict[str, dict[str, Any] | None] = {
        name: dict(section or {}) for name, section in config.worker_config.items()
    }
    for name, patch in (sections or {}).items():
        merged[name] = {**(merged.get(name) or {}), **patch}
    for index in range(2, replicas + 1):
        merged[f"orchestrator-{index}"] = merged.get("orchestrator")
    config = config.model_copy(update={"worker_config": merged})

    loaded = script if isinstance(script, Script) else Script.load(workdir / "scripts" / script)
    provider = ScriptedProvider(loaded, per_session=True, cursor="transcript")
    specs: list[WorkerSpec[Any]] = []
    for name in config.workers:
        if name == "scripted":
            specs.append(provider.worker_spec())
            continue
        spec = load_worker(name)
        specs.append(spec)
        if name == "orchestrator":
            specs += [
                dataclasses.replace(spec, name=f"orchestrator-{index}")
                for index in range(2, replicas + 1)
            ]
    engine = open_engine(config.engine, tracer_provider=tracer_provider)
    deliveries: dict[str, list[str]] = {}
    _counting(engine, (TURN_STEP, TURN_ON_APPROVAL), deliveries)
    if prepare is not None:
        prepare(engine)
    host = Host(engine=engine, workers=[*specs, *extra], config=config)
    async with host:
        yield Governed(host=host, provider=provider, workdir=workdir, deliveries=deliveries)


# -- reading the outcome -----------------------------------------------------------------------


async def turn_of(engine: Engine, session_id: str) -> TurnRecord | None:
    entry = await engine.get_state(TURNS_SCOPE, session_id)
    return None if entry is None else TurnRecord.model_validate(entry.value)


async def wait_for_terminal(engine: Engine, session_id: str, *, timeout: float = 10) -> TurnRecord:
    """The session's turn record once it is ``stopped`` or ``failed``."""
    found: list[TurnRecord | None] = [None]

    async def ended() -> bool:
        found[0] = record = await turn_of(engine, session_id)
        return record is not None and record.terminal

    await wait_until(
        ended,
        timeout=timeout,
        message=lambda: f"the run of {session_id} ends (now {found[0] and found[0].state})",
    )
    assert found[0] is not None
    return found[0]


async def wait_for_parked(engine: Engine, session_id: str, *calls: str) -> None:
    """Until the turn is parked with exactly ``calls`` awaiting approval."""

    async def parked() -> bool:
        record = await turn_of(engine, session_id)
        if record is None or record.state != "function_awaiting_approval":
            return False
        return sorted(c.id for c in record.calls if c.status == "parked") == sorted(calls)

    await wait_until(parked, message=f"{session_id} parks {calls} for approval")


async def events(engine: Engine, session_id: str) -> list[dict[str, Any]]:
    """The session's ``agent::events``, oldest first."""
    records = await engine.read(EVENTS_STREAM, session_id, after=0, limit=100_000)
    return [record.data for record in records]


async def resolve(
    engine: Engine, session_id: str, call_id: str, decision: str, **more: Any
) -> dict[str, Any]:
    """``approval::resolve``, as ``tackroom approve|deny`` sends it."""
    request = {"session_id": session_id, "function_call_id": call_id, "decision": decision, **more}
    reply: dict[str, Any] = await engine.trigger("approval::resolve", request, timeout=10)
    return reply
