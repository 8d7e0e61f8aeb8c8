"""Every route against the real workers: what it answers, and the typed error of each misuse."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx2 as httpx

from tackroom.contracts.approvals import GET_SETTINGS, SettingsRequest
from tackroom.contracts.audit import FACTS, FACTS_GROUP
from tackroom.contracts.budget import CREATE as BUDGET_CREATE
from tackroom.contracts.budget import CreateRequest as BudgetCreate
from tackroom.contracts.identity import API_KEYS, mint_key
from tackroom.contracts.messages import UserMessage
from tackroom.contracts.sessions import APPEND, AppendRequest
from tackroom.testing import wait_until

from .served import Served, gateway_config, read_events, serving


async def _parked(client: httpx.AsyncClient, session_id: str) -> dict[str, Any]:
    """Start a run on ``session_id`` and follow it to its approval request."""
    started = await client.post("/v1/runs", json={"prompt": "go", "session_id": session_id})
    assert started.status_code == 202, started.text
    async with client.stream("GET", f"/v1/sessions/{session_id}/events") as stream:
        events = await read_events(stream, until="approval_requested")
    data: dict[str, Any] = events[-1].data["data"]
    return data


def _error(reply: httpx.Response, status: int, code: str) -> str:
    assert reply.status_code == status, reply.text
    body = reply.json()
    assert set(body) == {"error"}
    assert body["error"]["code"] == code
    assert "Traceback" not in reply.text
    message: str = body["error"]["message"]
    assert "\n" not in message
    return message


async def test_a_run_starts_is_refused_or_queued_while_busy_and_aborts(served: Served) -> None:
    async with served.client() as client:
        await _parked(client, "r1")
        state = await client.get("/v1/sessions/r1/state")
        assert state.json()["state"] == "function_awaiting_approval"
        assert [c["function_id"] for c in state.json()["awaiting_approval"]] == ["fs::write"]
        busy = await client.post("/v1/runs", json={"prompt": "again", "session_id": "r1"})
        assert "run-" in _error(busy, 409, "session_busy")
        queued = await client.post(
            "/v1/runs", json={"prompt": "later", "session_id": "r1", "if_busy": "queue"}
        )
        assert (queued.status_code, queued.json()["queued"]) == (202, True)
        aborted = await client.post("/v1/sessions/r1/abort", json={"reason": "enough"})
        assert aborted.json() == {
            "session_id": "r1",
            "aborted": True,
            "state": "function_awaiting_approval",
        }
        await wait_until(lambda: _state(client, "r1", "stopped"))
        _error(await client.post("/v1/sessions/none/abort"), 404, "not_found")
        _error(await client.get("/v1/sessions/none/state"), 404, "not_found")


async def _state(client: httpx.AsyncClient, session_id: str, state: str) -> bool:
    reply = await client.get(f"/v1/sessions/{session_id}/state")
    return reply.status_code == 200 and reply.json()["state"] == state


async def test_a_run_takes_its_model_tools_and_output_schema_or_says_what_is_wrong(
    tmp_path: Path,
) -> None:
    script = [{"expect": {"system_prompt_contains": '"total"'}, "text": '{"total": 5}'}]
    config = gateway_config(
        tmp_path,
        f"embedded:{tmp_path / 'e.db'}",
        script=script,
        gateway={"defaults": {"model": None}},
    )
    async with serving(config) as served, served.client() as client:
        no_model = await client.post("/v1/runs", json={"prompt": "2 + 3?"})
        assert "body.model" in _error(no_model, 422, "invalid_request")
        body = {"prompt": "2 + 3?", "model": "scripted:demo", "session_id": "o1"}
        bad = await client.post("/v1/runs", json={**body, "output_schema": {"type": 12}})
        assert "output_schema" in _error(bad, 422, "invalid_request")
        schema = {"type": "object", "properties": {"total": {"type": "integer"}}}
        started = await client.post("/v1/runs", json={**body, "output_schema": schema})
        assert started.status_code == 202, started.text
        async with client.stream("GET", "/v1/sessions/o1/events") as stream:
            events = await read_events(stream)
        end = events[-1].data["data"]
        assert (end["state"], end["stop_reason"]) == ("stopped", "end"), end


async def test_sessions_list_search_show_page_and_tree(served: Served) -> None:
    async with served.client() as client:
        for name in ("alpha-1", "beta-2", "alpha-3"):
            await client.post("/v1/runs", json={"prompt": "hi", "session_id": name})
        listed = (await client.get("/v1/sessions", params={"limit": 2})).json()
        assert [s["session_id"] for s in listed["sessions"]] == ["alpha-3", "beta-2"]
        rest = await client.get("/v1/sessions", params={"cursor": listed["next_cursor"]})
        assert [s["session_id"] for s in rest.json()["sessions"]] == ["alpha-1"]
        assert rest.json()["next_cursor"] is None
        found = await client.get("/v1/sessions", params={"q": "ALPHA"})
        assert [s["session_id"] for s in found.json()["sessions"]] == ["alpha-3", "alpha-1"]
        for i in range(3):
            message = UserMessage.text(f"note {i}")
            await APPEND.call(served.engine, AppendRequest(session_id="beta-2", message=message))
        whole = (await client.get("/v1/sessions/beta-2")).json()
        assert whole["session"]["session_id"] == "beta-2"
        assert (len(whole["entries"]), whole["next_cursor"]) == (5, None)  # the run's 2, and 3
        paged, cursor = [], None
        while True:
            page = (await client.get("/v1/sessions/beta-2", params=_page(2, cursor))).json()
            assert len(page["entries"]) <= 2
            paged += page["entries"]
            if (cursor := page["next_cursor"]) is None:
                break
        assert paged == whole["entries"]
        bad_cursor = await client.get("/v1/sessions/beta-2", params={"cursor": "nope"})
        _error(bad_cursor, 422, "invalid_cursor")
        tree = (await client.get("/v1/sessions/beta-2/tree")).json()
        assert tree["session_id"] == "beta-2"
        _error(await client.get("/v1/sessions/absent"), 404, "session_not_found")
        _error(await client.get("/v1/sessions", params={"limit": 0}), 422, "invalid_request")


def _page(limit: int, cursor: str | None) -> dict[str, Any]:
    return {"limit": limit} if cursor is None else {"limit": limit, "cursor": cursor}


async def test_fork_delete_and_their_refusals(served: Served) -> None:
    async with served.client() as client:
        await _parked(client, "src")
        _error(await client.delete("/v1/sessions/src"), 409, "session_busy")
        await client.post("/v1/sessions/src/abort")
        await wait_until(lambda: _state(client, "src", "stopped"))
        entry = (await client.get("/v1/sessions/src")).json()["entries"][0]["entry_id"]
        fork = await client.post(
            "/v1/sessions/src/fork", json={"entry_id": entry, "new_session_id": "fork"}
        )
        assert fork.status_code == 201, fork.text
        assert fork.json()["origin"]["source_session_id"] == "src"
        missing = await client.post("/v1/sessions/src/fork", json={"entry_id": "absent"})
        _error(missing, 404, "entry_not_found")
        _error(await client.delete("/v1/sessions/src"), 409, "session_shared")
        assert (await client.delete("/v1/sessions/fork")).status_code == 204
        assert (await client.delete("/v1/sessions/src")).status_code == 204
        _error(await client.delete("/v1/sessions/src"), 404, "session_not_found")
        _error(await client.get("/v1/sessions/src/events"), 404, "session_not_found")


async def test_steering_and_follow_up_messages(served: Served) -> None:
    async with served.client() as client:
        await client.post("/v1/runs", json={"prompt": "hi", "session_id": "m1"})
        steer = await client.post("/v1/sessions/m1/messages", json={"text": "x", "kind": "steer"})
        assert (steer.status_code, steer.json()) == (202, {"count": 1})
        later = {"text": "y", "kind": "follow_up"}
        assert (await client.post("/v1/sessions/m1/messages", json=later)).status_code == 202
        odd = await client.post("/v1/sessions/m1/messages", json={"text": "y", "kind": "shout"})
        assert "body.kind" in _error(odd, 422, "invalid_request")
        absent = await client.post("/v1/sessions/zz/messages", json=later)
        _error(absent, 404, "session_not_found")


async def test_approvals_listed_decided_always_and_not_twice(served: Served) -> None:
    async with served.client() as client:
        call = await _parked(client, "a1")
        pending = (await client.get("/v1/approvals")).json()["pending"]
        assert [(p["session_id"], p["function_id"]) for p in pending] == [("a1", "fs::write")]
        url = f"/v1/approvals/a1/{call['function_call_id']}"
        deny_always = await client.post(url, json={"decision": "deny", "always": True})
        _error(deny_always, 422, "invalid_request")
        allowed = await client.post(url, json={"decision": "allow", "always": True})
        assert allowed.status_code == 200, allowed.text
        assert (allowed.json()["decision"], allowed.json()["approver"]) == ("allow", "owner")
        _error(await client.post(url, json={"decision": "deny"}), 409, "already_decided")
        _error(await client.post("/v1/approvals/a1/nope", json={"decision": "allow"}), 404,
               "not_pending")  # fmt: skip
        assert (await client.get("/v1/approvals")).json()["pending"] == []
        settings = await GET_SETTINGS.call(served.engine, SettingsRequest(session_id="a1"))
        assert settings.allowed_functions == ["fs::write"]
        await wait_until(lambda: _state(client, "a1", "stopped"))


async def test_budgets_functions_workers_health_and_readiness(served: Served) -> None:
    await BUDGET_CREATE.call(served.engine, BudgetCreate(id="b1", scope="session/s1", cap_usd=2.5))
    async with served.client() as client:
        [view] = (await client.get("/v1/budgets")).json()["budgets"]
        assert (view["budget"]["id"], view["usage"]["cap_usd"]) == ("b1", 2.5)
        functions = (await client.get("/v1/functions")).json()["functions"]
        assert "run::start" in {f["function_id"] for f in functions}
        workers = (await client.get("/v1/workers")).json()["workers"]
        assert {"orchestrator", "sessions"} <= {w["name"] for w in workers}
        traces = await client.get("/v1/traces", params={"session_id": "s1"})
        assert (traces.status_code, traces.json()["traces"]) == (200, [])
        _error(await client.get(f"/v1/traces/{'0' * 32}"), 404, "not_found")
    async with served.client(token=None) as anonymous:
        assert (await anonymous.get("/v1/health")).json() == {"status": "ok"}
        ready = await anonymous.get("/v1/ready")
        assert (ready.status_code, ready.json()["ready"]) == (200, True)


async def test_bad_requests_get_typed_4xx_never_a_traceback(served: Served) -> None:
    async with served.client() as client:
        _error(await client.post("/v1/runs", content=b"{nope"), 400, "invalid_json")
        _error(await client.post("/v1/runs", content=b"[1, 2]"), 400, "invalid_json")
        _error(await client.post("/v1/runs", content=b"[" * 100_000), 400, "invalid_json")
        unknown = await client.post("/v1/runs", json={"prompt": "x", "colour": "red"})
        assert "body.colour" in _error(unknown, 422, "invalid_request")
        wrong = await client.post("/v1/runs", json={"prompt": ["x"]})
        assert "body.prompt" in _error(wrong, 422, "invalid_request")
        huge = await client.post("/v1/runs", content=b'{"prompt": "' + b"x" * 2_000_000 + b'"}')
        _error(huge, 413, "body_too_large")
        _error(await client.get("/v1/nothing-here"), 404, "not_found")
        _error(await client.put("/v1/sessions"), 405, "method_not_allowed")
        _error(await client.get("/v1/sessions/a%20b"), 422, "invalid_request")
        _error(await client.get("/v1/traces/not-hex"), 422, "invalid_request")
        cursor = {"Last-Event-ID": "-1"}
        _error(await client.get("/v1/sessions/x/events", headers=cursor), 422, "invalid_request")


async def test_a_session_id_that_cannot_name_a_workspace_is_refused(served: Served) -> None:
    async with served.client() as client:
        for bad in (".", "..", "x" * 200 + ":"):
            reply = await client.post("/v1/runs", json={"prompt": "go", "session_id": bad})
            assert reply.status_code == 422, (bad, reply.text)
        fork = await client.post(
            "/v1/sessions/nope/fork", json={"entry_id": "e", "new_session_id": ".."}
        )
        assert fork.status_code == 422, fork.text


async def test_a_refused_action_is_a_403_that_says_why_and_an_audit_fact(served: Served) -> None:
    minted = mint_key(tenant="acme", user="carol", roles=("viewer",), now=time.time())
    await API_KEYS.set(served.engine, minted.record.key_id, minted.record)
    async with served.client(token=minted.text) as carol:
        reply = await carol.post("/v1/runs", json={"prompt": "go", "session_id": "v1"})
    message = _error(reply, 403, "forbidden")
    assert "run" in message
    records = await served.engine.read(FACTS.name, FACTS_GROUP)
    [denied] = [r.data for r in records if r.data.get("kind") == "access_denied"]
    assert denied["principal"]["id"] == "carol"
    assert denied["fact"]["action"] == "run"
    assert denied["session_id"] == "acme:v1"
