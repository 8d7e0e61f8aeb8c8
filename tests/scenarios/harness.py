"""The governance scenario of ``examples/governance/``, booted in process from its own files.

:func:`copy_example` copies the example to a short temporary folder (the endpoint's socket path
must fit in 107 bytes) and :func:`governed` boots it as ``tackroom run`` does: a
``tackroom.Harness`` on its ``tackroom.yaml``, with the scripted provider built in Python from one
of the example's scripts so a test can read the requests the model got. ``replicas`` boots more
``orchestrator`` workers on the same engine: queue deliveries and state-trigger wakes then land
on any of them.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import TracerProvider

from tackroom import Harness
from tackroom.contracts.events import EVENTS
from tackroom.contracts.turn import (
    TURN_ON_APPROVAL,
    TURN_STEP,
    RunStartResponse,
    TurnStateView,
)
from tackroom.engine import Engine, Handler, Registration, open_engine
from tackroom.runtime import WorkerSpec, load_worker
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
    "working_copy",
]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "governance"

SECRETS = (
    "sk-demo-FAKEc0ffee0123456789abcdef",
    "AKIAIOSFODNN7EXAMPLE",
    "tr0ub4dor-and-3",
)
"""The credentials in ``workspaces/redact-demo/config/deploy.env``: nothing may keep them."""


@contextmanager
def working_copy() -> Iterator[Path]:
    """A fresh copy of the example made the working directory (as its README says), in a short
    temporary path (the endpoint's socket path must fit in 107 bytes)."""
    before = Path.cwd()
    with tempfile.TemporaryDirectory(prefix="tr-") as directory:
        workdir = copy_example(Path(directory))
        os.chdir(workdir)
        try:
            yield workdir
        finally:
            os.chdir(before)


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
    """The example's ``tackroom.Harness`` (``facade``), booted in process."""

    facade: Harness
    provider: ScriptedProvider
    workdir: Path
    deliveries: dict[str, list[str]] = field(default_factory=dict)
    """Function id (``turn::step``, ``turn::on_approval``) → the workers that handled each call."""

    @property
    def engine(self) -> Engine:
        return self.facade.engine

    runs: dict[str, int] = field(default_factory=dict)

    def _next_run_id(self, session_id: str) -> str:
        """``run-<session_id>``, then ``run-<session_id>-2``, …: a run id names one run (a start
        that repeats one resumes that run)."""
        count = self.runs[session_id] = self.runs.get(session_id, 0) + 1
        return f"run-{session_id}" if count == 1 else f"run-{session_id}-{count}"

    async def start(self, session_id: str, text: str = "go") -> RunStartResponse:
        """Start the session's next run (``run-<session_id>`` first) without following it."""
        reply = await self.facade.submit(
            text, session=session_id, run_id=self._next_run_id(session_id)
        )
        assert reply.started, reply.reason
        return reply

    async def run(self, session_id: str, text: str = "go") -> TurnStateView:
        """Run the session's next run (``run-<session_id>`` first) to its end; the turn as
        committed then."""
        result = await self.facade.run(
            text, session=session_id, run_id=self._next_run_id(session_id)
        )
        view = await wait_for_terminal(self.facade, session_id)
        assert (view.run_id, view.stop_reason) == (result.run_id, result.stop_reason), result
        return view


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
    tools: Sequence[str] | None = None,
    tracer_provider: TracerProvider | None = None,
    prepare: Callable[[Engine], None] | None = None,
) -> AsyncIterator[Governed]:
    """Boot the example in ``workdir`` (the working directory must be ``workdir``: the files
    worker and the policy read paths relative to it).

    ``script``: a file name under ``scripts/`` or a :class:`Script`; ``sections``: config keys
    merged over the example's ``worker_config``; ``replicas``: orchestrators on the one engine;
    ``extra``: more workers; ``tools``: offered instead of the example's ``agent.tools``;
    ``prepare(engine)``: called before the harness starts.
    """
    config = load_config(workdir / "tackroom.yaml")
    merged: dict[str, dict[str, Any] | None] = {
        name: dict(section or {}) for name, section in config.worker_config.items()
    }
    for name, patch in (sections or {}).items():
        merged[name] = {**(merged.get(name) or {}), **patch}
    for index in range(2, replicas + 1):
        merged[f"orchestrator-{index}"] = merged.get("orchestrator")
    config = config.model_copy(update={"worker_config": merged})
    orchestrator = load_worker("orchestrator")
    replica_specs = [
        dataclasses.replace(orchestrator, name=f"orchestrator-{index}")
        for index in range(2, replicas + 1)
    ]

    loaded = script if isinstance(script, Script) else Script.load(workdir / "scripts" / script)
    provider = ScriptedProvider(loaded, per_session=True, cursor="transcript")
    engine = open_engine(config.engine, tracer_provider=tracer_provider)
    deliveries: dict[str, list[str]] = {}
    _counting(engine, (TURN_STEP, TURN_ON_APPROVAL), deliveries)
    if prepare is not None:
        prepare(engine)
    facade = Harness(
        provider,
        config=config,
        engine=engine,
        tools=list(tools or ()),
        workers=[*replica_specs, *extra],
    )
    async with facade:
        yield Governed(facade=facade, provider=provider, workdir=workdir, deliveries=deliveries)


# -- reading the outcome -----------------------------------------------------------------------


async def turn_of(engine: Engine, session_id: str) -> TurnRecord | None:
    entry = await engine.get_state(TURNS_SCOPE, session_id)
    return None if entry is None else TurnRecord.model_validate(entry.value)


async def wait_for_terminal(
    harness: Governed | Harness, session_id: str, *, timeout: float = 10
) -> TurnStateView:
    """The session's turn (``turn::get_state``) once it is ``stopped`` or ``failed``."""
    front = harness.facade if isinstance(harness, Governed) else harness
    found: list[TurnStateView | None] = [None]

    async def ended() -> bool:
        found[0] = view = await front.get_state(session_id)
        return view is not None and view.state in ("stopped", "failed")

    await wait_until(
        ended,
        timeout=timeout,
        message=lambda: f"the run of {session_id} ends (now {found[0] and found[0].state})",
    )
    assert found[0] is not None
    return found[0]


async def wait_for_parked(harness: Governed, session_id: str, *calls: str) -> None:
    """Until the turn is parked with exactly ``calls`` awaiting approval."""

    async def parked() -> bool:
        view = await harness.facade.get_state(session_id)
        if view is None or view.state != "function_awaiting_approval":
            return False
        return sorted(c.function_call_id for c in view.awaiting_approval) == sorted(calls)

    await wait_until(parked, message=f"{session_id} parks {calls} for approval")


async def events(engine: Engine, session_id: str) -> list[dict[str, Any]]:
    """The session's ``agent::events``, oldest first."""
    records = await engine.read(EVENTS.name, session_id, after=0, limit=100_000)
    return [record.data for record in records]


async def resolve(
    engine: Engine, session_id: str, call_id: str, decision: str, **more: Any
) -> dict[str, Any]:
    """``approval::resolve``, as ``tackroom approve|deny`` sends it."""
    request = {"session_id": session_id, "function_call_id": call_id, "decision": decision, **more}
    reply: dict[str, Any] = await engine.trigger("approval::resolve", request, timeout=10)
    return reply
