"""One run, one trace — and reading makes none. A run that stops for approval and goes on once a
person allows the call is one trace, every step before the pause and after it under the run's
root, and the session's trace list shows it once with all its spans. Reading the console's pages
(the gateway's GET routes) and an approvals sweep that finds nothing make no trace. On both
engine backends."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx2 as httpx

from tackroom.contracts import sessions as tree
from tackroom.contracts.approvals import SWEEP, SweepRequest
from tackroom.contracts.traces import LIST, ListRequest
from tackroom.runtime.config import HarnessConfig
from tackroom.testing import wait_until

from .served import WRITE_THEN_ANSWER, Served, gateway_config, read_events, serving

TRACED = {"exporters": ["bus"], "bus": {"flush_interval": 0.05}}


def traced(tmp_path: Path, engine_url: str) -> HarnessConfig:
    config = gateway_config(tmp_path, engine_url, script=WRITE_THEN_ANSWER)
    return config.model_copy(update={"tracing": config.tracing.model_validate(TRACED)})


async def run_with_approval(client: httpx.AsyncClient, session_id: str) -> str:
    """Start a run, allow the call it parks, follow it to its end; its run id."""
    started = await client.post("/v1/runs", json={"prompt": "go", "session_id": session_id})
    assert started.status_code == 202, started.text
    async with client.stream("GET", f"/v1/sessions/{session_id}/events") as stream:
        [*_, asked] = await read_events(stream, until="approval_requested")
    call_id = asked.data["data"]["function_call_id"]
    allowed = await client.post(f"/v1/approvals/{session_id}/{call_id}", json={"decision": "allow"})
    assert allowed.status_code == 200, allowed.text
    async with client.stream("GET", f"/v1/sessions/{session_id}/events") as stream:
        await read_events(stream, until="agent_end")
    run_id: str = asked.data["run_id"]
    return run_id


async def listed_for_run(client: httpx.AsyncClient, session_id: str, run_id: str) -> list[Any]:
    """The session's listed traces of ``run_id`` once they hold its last step (the run's end),
    each listed with as many spans as it holds: the traces, with every span of each."""
    found: list[Any] = []

    async def ended() -> bool:
        listed = await client.get("/v1/traces", params={"session_id": session_id})
        assert listed.status_code == 200, listed.text
        mine = [t for t in listed.json()["traces"] if t["run_id"] == run_id]
        found[:] = [
            (t, (await client.get(f"/v1/traces/{t['trace_id']}")).json()["spans"]) for t in mine
        ]
        names = [span["name"] for _, spans in found for span in spans]
        whole = all(summary["span_count"] == len(spans) for summary, spans in found)
        last = ("chat demo", "turn.step steering_check")  # the last step's span ends last
        return whole and all(names.count(name) == 2 for name in last)

    await wait_until(ended, message=lambda: f"the run's last step in {found}")
    return found


async def test_a_run_paused_for_approval_is_one_trace_listed_once(
    engine_url: str, tmp_path: Path
) -> None:
    async with serving(traced(tmp_path, engine_url)) as served, served.client() as client:
        run_id = await run_with_approval(client, "t1")
        found = await listed_for_run(client, "t1", run_id)
    assert len(found) == 1, [sorted({s["name"] for s in spans}) for _, spans in found]
    [(summary, spans)] = found
    assert summary["span_count"] == len(spans)
    names = [span["name"] for span in spans]
    before = {"trigger run::start", "turn.step provisioning", "turn.step function_execute"}
    after = {"turn.step function_awaiting_approval", "execute_tool fs__write"}
    assert before | after <= set(names), names
    [root] = [span for span in spans if span["parent_span_id"] is None]
    assert root["name"] == "trigger run::start"
    ids = {span["span_id"] for span in spans}
    assert all(span["parent_span_id"] in ids for span in spans if span is not root)
    *_, resumed = [s for s in spans if s["name"] == "turn.step function_awaiting_approval"]
    assert resumed["parent_span_id"] == root["span_id"]  # the step the approval woke


async def trace_roots(served: Served) -> dict[str, str]:
    listed = await LIST.call(served.engine, ListRequest(limit=1000))
    return {t.trace_id: t.root_name for t in listed.traces}


async def test_reading_pages_and_an_idle_sweep_make_no_trace(
    engine_url: str, tmp_path: Path
) -> None:
    async with serving(traced(tmp_path, engine_url)) as served, served.client() as client:
        created = await client.post("/v1/runs", json={"prompt": "go", "session_id": "b1"})
        assert created.status_code == 202, created.text
        await wait_until(lambda: _listed(served, "trigger run::start"))
        known = await trace_roots(served)
        for path in (
            "/v1/sessions",
            "/v1/sessions/b1",
            "/v1/sessions/b1/tree",
            "/v1/sessions/b1/state",
            "/v1/approvals",
            "/v1/traces",
            "/v1/functions",
            "/v1/workers",
            "/v1/budgets",
        ):
            read = await client.get(path)
            assert read.status_code == 200, (path, read.text)
        assert (await SWEEP.call(served.engine, SweepRequest())).expired == []
        # A traced call after them: once its trace is stored, theirs would be too.
        await tree.TREE.call(served.engine, tree.TreeRequest(session_id="b1"))
        await wait_until(lambda: _listed(served, "trigger session-tree::tree"))
        new = {k: v for k, v in (await trace_roots(served)).items() if k not in known}
    assert sorted(new.values()) == ["trigger session-tree::tree"]


async def _listed(served: Served, root_name: str) -> bool:
    return root_name in (await trace_roots(served)).values()
