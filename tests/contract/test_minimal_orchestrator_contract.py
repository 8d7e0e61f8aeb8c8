"""A user's replacement orchestrator (``minimal_orchestrator.py``, written against contracts, kit,
runtime and engine only) passes the orchestrator suite, and the gateway and the console show its
runs as they show the shipped one's: the run started over HTTP, its events read from the SSE
stream the console reads, its transcript and state from the ``/v1`` routes the console calls."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2 as httpx

from tackroom.engine import open_engine
from tackroom.runtime.config import HarnessConfig
from tackroom.runtime.host import Host
from tackroom.runtime.registry import load_worker
from tackroom.testing import ScriptedProvider
from tackroom.testing.contracts.base import OnEveryBackend
from tackroom.testing.contracts.orchestra import (
    ECHO,
    MODEL,
    PROVIDER,
    ContractTools,
    told_in_order,
)
from tackroom.testing.contracts.orchestrator import OrchestratorContract

from ..workers.gateway.served import TOKEN, read_events
from .minimal_orchestrator import WORKER


class TestMinimalOrchestrator(OrchestratorContract):
    worker = WORKER

    def worker_config(self, directory: Path) -> dict[str, Any]:
        return {"policy_function": "policy::check_permissions"}


ANSWER = "The echo tool answered PING."
CONSOLE_SCRIPT: list[dict[str, Any]] = [
    {"tool_calls": [{"function_id": ECHO, "arguments": {"text": "ping"}, "id": "c-echo"}]},
    {"text": ANSWER},
]


@asynccontextmanager
async def gateway_over_minimal(engine_url: str, home: Path) -> AsyncIterator[str]:
    """``tackroom serve``'s gateway with the minimal orchestrator in the shipped one's place,
    beside the sessions, the policy, the scripted model and the test tools; its base URL."""
    suite = TestMinimalOrchestrator()
    sections: dict[str, dict[str, Any] | None] = {
        **suite.collaborator_config(home),
        WORKER.name: suite.worker_config(home),
        "gateway": {
            "port": 0,
            "token": TOKEN,
            "token_path": None,
            "defaults": {"model": f"{PROVIDER}:{MODEL}", "tools": ["contract::*"]},
        },
    }
    config = HarnessConfig.defaults().model_copy(update={"worker_config": sections})
    workers = [
        *(load_worker(name) for name in ("engine", "sessions", "policy")),
        ScriptedProvider(CONSOLE_SCRIPT, name=PROVIDER).worker_spec(),
        ContractTools().worker_spec(),
        WORKER,
        load_worker("gateway"),
    ]
    async with Host(engine=open_engine(engine_url), workers=workers, config=config) as host:
        [line] = [a for a in host.announcements if a.startswith("console: ")]
        yield line.removeprefix("console: ").partition("#")[0].rstrip("/")


class TestTheConsoleShowsItsRuns(OnEveryBackend):
    async def test_a_run_over_http_reads_as_the_console_reads_it(
        self, engine_url: str, tmp_path: Path
    ) -> None:
        auth = {"Authorization": f"Bearer {TOKEN}"}
        async with (
            gateway_over_minimal(engine_url, tmp_path) as url,
            httpx.AsyncClient(base_url=url, headers=auth, timeout=20) as client,
        ):
            # the console's run form: POST /v1/runs
            started = await client.post(
                "/v1/runs", json={"prompt": "echo ping", "session_id": "c1"}
            )
            assert started.status_code == 202, started.text
            run = started.json()
            assert (run["session_id"], run["started"]) == ("c1", True)
            # the live panel: the session's event stream, from its first event
            async with client.stream("GET", run["events_url"]) as stream:
                assert stream.headers["content-type"].startswith("text/event-stream")
                events = await read_events(stream)
            # the transcript and the run's state, once it ended
            session = await client.get("/v1/sessions/c1")
            state = await client.get("/v1/sessions/c1/state")
            listed = await client.get("/v1/sessions", params={"q": "c1"})

        # each event stored (an id to resume from), named by its type, of this run, in order
        assert all(e.id is not None and e.event == e.data["type"] for e in events)
        types = told_in_order([e.data for e in events], "c1", run["run_id"])
        data = [e.data["data"] for e in events]
        [gate] = [d for t, d in zip(types, data, strict=True) if t == "gate_decision"]
        assert (gate["function_id"], gate["decision"]) == (ECHO, "allow")
        [call] = [d for t, d in zip(types, data, strict=True) if t == "function_execution_start"]
        assert (call["function_call_id"], call["arguments"]) == ("c-echo", {"text": "ping"})
        [done] = [d for t, d in zip(types, data, strict=True) if t == "function_execution_end"]
        assert not done["is_error"]
        assert "PING" in done["result"]["content"][0]["text"]
        answers = [
            d["message"] for t, d in zip(types, data, strict=True) if t == "message_complete"
        ]
        assert answers[-1]["content"] == [{"type": "text", "text": ANSWER}]
        assert (data[-1]["state"], data[-1]["stop_reason"]) == ("stopped", "end")

        assert session.status_code == 200, session.text
        entries = session.json()["entries"]
        roles = [e["message"]["role"] for e in entries]
        assert roles == ["user", "assistant", "function_result", "assistant"]
        assert entries[0]["message"]["content"][0]["text"] == "echo ping"
        assert entries[-1]["message"]["content"][0]["text"] == ANSWER
        assert session.json()["session"]["entry_count"] == 4
        assert state.status_code == 200, state.text
        view = state.json()
        assert (view["run_id"], view["state"], view["turn_count"]) == (run["run_id"], "stopped", 2)
        assert [s["session_id"] for s in listed.json()["sessions"]] == ["c1"]
