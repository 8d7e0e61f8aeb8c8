"""Pins and manual compaction over HTTP: a rule pinned, the history compacted on request, the
compaction entry naming what it replaced, and the model still reading the rule afterwards."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx2 as httpx

from tackroom.contracts.sessions import ENSURE, EnsureRequest

from .served import gateway_config, read_events, serving

RULE = "Always answer in French."
LONG = " ".join(["the tide comes in and the tide goes out"] * 12)
SUMMARY = "Four questions about tides, all answered."
SCRIPT: list[dict[str, Any]] = [
    *({"text": f"answer {i}: {LONG}"} for i in range(4)),
    {"text": SUMMARY},
    {"expect": {"last_user_contains": "and now"}, "text": "Réponse."},
]
AGENT = {"tools": [], "context": {"context_window_limit": 2000, "keep_last": 2}}


async def _run(
    client: httpx.AsyncClient, session_id: str, prompt: str, *, model: str | None = None
) -> None:
    body = {"prompt": prompt, "session_id": session_id}
    started = await client.post(
        "/v1/runs", json=body if model is None else {**body, "model": model}
    )
    assert started.status_code == 202, started.text
    run_id = started.json()["run_id"]
    async with client.stream(
        "GET", f"/v1/sessions/{session_id}/events", params={"run_id": run_id}
    ) as stream:
        events = await read_events(stream)
    assert events[-1].data["data"]["stop_reason"] == "end", events[-1].data


def _error(reply: httpx.Response, status: int, code: str) -> str:
    assert reply.status_code == status, reply.text
    error = reply.json()["error"]
    assert error["code"] == code
    message: str = error["message"]
    assert "\n" not in message
    return message


async def test_pin_compact_and_unpin_over_http(tmp_path: Path, engine_url: str) -> None:
    """On both backends: the pins live in the session's metadata, the compaction in its tree."""
    config = gateway_config(tmp_path, engine_url, script=SCRIPT, agent=AGENT)
    async with serving(config) as served, served.client() as client:
        await _run(client, "c1", f"question 0: {LONG}")
        pinned = await client.post("/v1/sessions/c1/pins", json={"text": RULE, "entry_id": "r1"})
        assert pinned.status_code == 200, pinned.text
        assert pinned.json() == {
            "schema_version": 1,
            "session_id": "c1",
            "entry_id": "r1",
            "pinned": ["r1"],
        }
        again = await client.post("/v1/sessions/c1/pins", json={"text": RULE, "entry_id": "r1"})
        assert again.json()["pinned"] == ["r1"]  # a retry stores and pins the rule once
        for i in range(1, 4):
            await _run(client, "c1", f"question {i}: {LONG}")
        before = [e["entry_id"] for e in (await client.get("/v1/sessions/c1")).json()["entries"]]
        assert before.count("r1") == 1

        compacted = await client.post("/v1/sessions/c1/compact", json={})
        assert compacted.status_code == 200, compacted.text
        done = compacted.json()
        assert done["compacted"] is True
        detail = (await client.get("/v1/sessions/c1")).json()
        assert detail["session"]["pinned"] == ["r1"]
        entry = detail["entries"][-1]
        assert entry["entry_id"] == done["entry_id"]
        assert entry["type"] == "compaction"
        provenance = entry["message"]["details"]
        assert provenance["reason"] == "manual"
        assert (provenance["provider"], provenance["model"]) == ("scripted", "demo")
        assert len(provenance["replaces"]) == done["replaced"] > 0
        assert set(provenance["replaces"]) < set(before)
        assert "r1" not in provenance["replaces"]

        await _run(client, "c1", "and now?")
        rule = _error(
            await client.post("/v1/sessions/c1/pins", json={"entry_id": done["entry_id"]}),
            422,
            "not_pinnable",
        )
        assert "compaction" in rule
        unpinned = await client.delete("/v1/sessions/c1/pins/r1")
        assert (unpinned.status_code, unpinned.json()["pinned"]) == (200, [])


async def test_refusals_in_one_line(tmp_path: Path) -> None:
    config = gateway_config(
        tmp_path,
        f"embedded:{tmp_path / 'e.db'}",
        script=[{"text": "hi"}],
        agent=AGENT,
        gateway={"defaults": {"model": None}},
    )
    async with serving(config) as served, served.client() as client:
        _error(
            await client.post("/v1/sessions/none/pins", json={"text": RULE}),
            404,
            "session_not_found",
        )
        _error(await client.post("/v1/sessions/none/compact"), 404, "session_not_found")
        _error(await client.delete("/v1/sessions/none/pins/e1"), 404, "session_not_found")
        await _run(client, "c2", "hi", model="scripted:demo")
        assert "entry_id" in _error(
            await client.post("/v1/sessions/c2/pins", json={}), 422, "invalid_request"
        )
        missing = await client.post("/v1/sessions/c2/pins", json={"entry_id": "e-x"})
        _error(missing, 404, "entry_not_found")
        _error(await client.post("/v1/sessions/c2/pins", json={"txt": "x"}), 422, "invalid_request")
        bad_model = await client.post("/v1/sessions/c2/compact", json={"model": "nocolon"})
        _error(bad_model, 422, "invalid_request")
        nothing = await client.post("/v1/sessions/c2/compact")  # the session's own model
        assert nothing.json()["compacted"] is False
        assert "nothing older" in nothing.json()["detail"]
        await ENSURE.call(served.engine, EnsureRequest(session_id="c3"))
        no_answer = await client.post("/v1/sessions/c3/compact")
        assert "no default" in _error(no_answer, 422, "invalid_request")
        async with served.client(token=None) as anonymous:
            unauthorized = await anonymous.post("/v1/sessions/c2/compact")
        assert unauthorized.status_code == 401
