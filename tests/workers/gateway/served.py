"""A gateway in front of the agent workers, booted in process as ``tackroom serve`` boots it
(same wiring), on a real port, with the scripted model; and an HTTP client for it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2 as httpx

from tackroom.engine import Engine, open_engine
from tackroom.engine.tracing import build_tracer_provider
from tackroom.harness.wiring import agent_host_config, gateway_host_config, with_home
from tackroom.runtime.config import AgentSettings, HarnessConfig
from tackroom.runtime.host import Host
from tackroom.runtime.registry import load_worker
from tackroom.testing import ScriptedProvider

TOKEN = "test-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}

WRITE_THEN_ANSWER: list[dict[str, Any]] = [
    {"tool_calls": [{"function_id": "fs::write", "arguments": {"path": "a.txt", "content": "hi"}}]},
    {"text": "I wrote the file you asked for, and here is a longer answer.", "deltas": "words"},
]
"""A run that stops for approval (``fs::write`` asks under the default policy), then answers in
several deltas: a run with a known middle."""


@dataclass
class Served:
    host: Host
    url: str

    @property
    def engine(self) -> Engine:
        return self.host.engine

    def client(self, *, token: str | None = TOKEN) -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        return httpx.AsyncClient(base_url=self.url, headers=headers, timeout=20)


def gateway_config(
    home: Path,
    engine_url: str,
    *,
    script: Sequence[Mapping[str, Any]],
    gateway: Mapping[str, Any] | None = None,
    agent: Mapping[str, Any] | None = None,
    sections: Mapping[str, Any] | None = None,
) -> HarnessConfig:
    """What ``tackroom serve`` boots for ``agent.model: scripted:demo`` with ``script`` (and
    ``agent`` settings over those, and more worker config ``sections``), and a gateway on a free
    port with :data:`TOKEN`."""
    settings = {"model": "scripted:demo", "tools": ["fs::*", "calc::*"], **(agent or {})}
    base = HarnessConfig.defaults().model_copy(
        update={
            "agent": AgentSettings.model_validate(settings),
            "worker_config": {
                "gateway": {"port": 0, "token": TOKEN, **(gateway or {})},
                "orchestrator": {"coalesce_chars": 1},
                **(sections or {}),
            },
        }
    )
    config = agent_host_config(
        with_home(base, home, engine=engine_url), provider="scripted", script=script
    )
    config = gateway_host_config(config)
    return config.model_copy(update={"workers": [*config.workers, "budget", "traces", "gateway"]})


@asynccontextmanager
async def serving(
    config: HarnessConfig, *, provider: ScriptedProvider | None = None
) -> AsyncIterator[Served]:
    """``provider``: the scripted model as a Python object (a held one, say) instead of the
    ``scripted`` worker the config names."""
    workers = [
        provider.worker_spec() if provider is not None and name == "scripted" else load_worker(name)
        for name in config.workers
    ]
    if provider is not None:  # its own worker takes no config section
        sections = {k: v for k, v in config.worker_config.items() if k != "scripted"}
        config = config.model_copy(update={"worker_config": sections})
    tracer = build_tracer_provider(config.tracing.to_tracing_config())  # None: not traced
    host = Host(
        engine=open_engine(config.engine, tracer_provider=tracer, trace_spans=config.tracing.spans),
        workers=workers,
        config=config,
        tracer_provider=tracer,
    )
    async with host:
        [line] = [a for a in host.announcements if a.startswith("console: ")]
        yield Served(host, line.removeprefix("console: ").partition("#")[0].rstrip("/"))


@dataclass
class SseEvent:
    id: int | None
    """``None``: a live event (a delta, a snapshot), which has no id."""
    event: str
    data: dict[str, Any]


class EventReader:
    """Reads one open SSE response in parts (heartbeats and other comments skipped)."""

    def __init__(self, response: httpx.Response) -> None:
        self._lines = response.aiter_lines()

    async def read(
        self, *, until: str | None = "agent_end", count: int | None = None
    ) -> list[SseEvent]:
        """Events until one of type ``until`` (included), ``count`` of them, or the end."""
        events: list[SseEvent] = []
        fields: dict[str, str] = {}
        while True:
            try:
                line = await anext(self._lines)
            except StopAsyncIteration:
                return events
            if line.startswith(":"):
                continue
            if line:
                name, _, value = line.partition(": ")
                fields[name] = value
                continue
            if not fields:
                continue
            seq = int(fields["id"]) if "id" in fields else None
            event = SseEvent(seq, fields["event"], json.loads(fields["data"]))
            fields = {}
            events.append(event)
            if event.event == until or (count is not None and len(events) == count):
                return events


async def read_events(
    response: httpx.Response, *, until: str | None = "agent_end", count: int | None = None
) -> list[SseEvent]:
    """:meth:`EventReader.read` on a response read once."""
    return await EventReader(response).read(until=until, count=count)
