"""What a session's stored events say about its runs: read from ``agent::events`` (the one
record every run leaves, whatever the backend) and folded into one summary per run — its status,
models, tools, usage, who it acted for, when it started and ended."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from tackroom.contracts.engine import STREAM_READ, StreamReadRequest
from tackroom.contracts.events import EVENTS
from tackroom.contracts.messages import Usage
from tackroom.workers.gateway.service import Gateway

__all__ = ["RUN_STATUSES", "RunStatus", "RunSummary", "StoredEvent", "runs_of", "stored_events"]

_PAGE = 1000

RunStatus = Literal["running", "waiting", "stopped", "failed"]
RUN_STATUSES: tuple[RunStatus, ...] = ("running", "waiting", "stopped", "failed")
"""``waiting``: parked on a call that waits for a person."""


@dataclass(frozen=True, slots=True)
class StoredEvent:
    seq: int
    timestamp: float
    frame: dict[str, Any]

    @property
    def type(self) -> str:
        return str(self.frame.get("type", ""))

    @property
    def run_id(self) -> str | None:
        run = self.frame.get("run_id")
        return run if isinstance(run, str) else None

    @property
    def data(self) -> dict[str, Any]:
        data = self.frame.get("data")
        return data if isinstance(data, dict) else {}


async def stored_events(gateway: Gateway, session_id: str) -> list[StoredEvent]:
    """Every stored event of the session, in order (``stream::read``, a page at a time)."""
    events: list[StoredEvent] = []
    after = 0
    while True:
        request = StreamReadRequest(
            stream=EVENTS.name, group_id=session_id, after=after, limit=_PAGE
        )
        page = (await gateway.call(STREAM_READ, request)).records
        events.extend(
            StoredEvent(record.seq, record.timestamp, record.data)
            for record in page
            if isinstance(record.data, dict)
        )
        if len(page) < _PAGE:
            return events
        after = page[-1].seq


class RunSummary(BaseModel):
    """One run as its events tell it."""

    model_config = ConfigDict(extra="ignore", defer_build=True)

    schema_version: int = 1
    session_id: str
    run_id: str
    status: RunStatus
    stop_reason: str | None = None
    models: list[str] = Field(
        default_factory=list, description="provider:model of each model that answered, in order"
    )
    tools: list[str] = Field(default_factory=list, description="function ids the run called")
    model_calls: int = 0
    usage: Usage = Field(default_factory=Usage)
    principal: str | None = Field(default=None, description="the id of whom the run acted for")
    started_at: float
    ended_at: float | None = None
    events: int = Field(description="stored events of the run")


@dataclass(slots=True)
class _Fold:
    session_id: str
    run_id: str
    started_at: float
    ended_at: float | None = None
    state: str = "provisioning"
    stop_reason: str | None = None
    models: list[str] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)
    calls: int = 0
    usage: Usage = field(default_factory=Usage)
    total: Usage | None = None
    principal: str | None = None
    events: int = 0

    def add(self, event: StoredEvent) -> None:
        self.events += 1
        data = event.data
        kind = event.type
        if kind == "turn_state_changed":
            self.state = str(data.get("to", self.state))
            who = data.get("principal")
            if isinstance(who, dict) and self.principal is None:
                self.principal = str(who.get("id")) if who.get("id") else None
        elif kind == "message_complete":
            self._answer(data.get("message"))
        elif kind in ("function_execution_start", "gate_decision"):
            function = data.get("function_id")
            if isinstance(function, str) and function not in self.tools:
                self.tools.append(function)
        elif kind == "agent_end":
            self.state = str(data.get("state", "stopped"))
            self.stop_reason = data.get("stop_reason")
            self.ended_at = event.timestamp
            if isinstance(data.get("usage"), dict):
                self.total = Usage.model_validate(data["usage"])

    def _answer(self, message: Any) -> None:
        if not isinstance(message, dict) or message.get("role") != "assistant":
            return
        self.calls += 1
        name = f"{message.get('provider', '')}:{message.get('model', '')}".strip(":")
        if name and name not in self.models:
            self.models.append(name)
        if isinstance(message.get("usage"), dict):
            self.usage = self.usage + Usage.model_validate(message["usage"])

    def summary(self) -> RunSummary:
        return RunSummary(
            session_id=self.session_id,
            run_id=self.run_id,
            status=_status(self.state),
            stop_reason=self.stop_reason,
            models=self.models,
            tools=self.tools,
            model_calls=self.calls,
            usage=self.total if self.total is not None else self.usage,
            principal=self.principal,
            started_at=self.started_at,
            ended_at=self.ended_at,
            events=self.events,
        )


def _status(state: str) -> RunStatus:
    if state in ("stopped", "failed"):
        return "stopped" if state == "stopped" else "failed"
    return "waiting" if state == "function_awaiting_approval" else "running"


def runs_of(session_id: str, events: list[StoredEvent]) -> list[RunSummary]:
    """The session's runs, in the order they started."""
    folds: dict[str, _Fold] = {}
    for event in events:
        run = event.run_id
        if run is None:
            continue
        fold = folds.get(run)
        if fold is None:
            fold = folds[run] = _Fold(session_id, run, event.timestamp)
        fold.add(event)
    return [fold.summary() for fold in folds.values()]
