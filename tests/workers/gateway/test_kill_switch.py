"""The kill switch over HTTP, on both backends: an admin aborts every run of its tenant in
flight and new ones are refused until it resumes them; another tenant's runs are never touched,
another tenant's admin finds no such tenant, a member is forbidden; on and off are audit facts.
And ``GET /v1/audit/flows`` answers in the caller's tenant."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx2 as httpx
import pytest

from tackroom.contracts.audit import EXPORT, ExportRequest
from tackroom.contracts.identity import API_KEYS, mint_key

from .served import WRITE_THEN_ANSWER, Served, gateway_config, serving

USERS = {
    "alice": ("acme", ("member",)),
    "ada": ("acme", ("admin",)),
    "bob": ("beta", ("member",)),
    "bea": ("beta", ("admin",)),
}


@pytest.fixture
async def world(engine_url: str, tmp_path: Path) -> AsyncIterator[tuple[Served, dict[str, str]]]:
    config = gateway_config(tmp_path, engine_url, script=WRITE_THEN_ANSWER)
    async with serving(config) as served:
        keys = {}
        for user, (tenant, roles) in USERS.items():
            minted = mint_key(tenant=tenant, user=user, roles=roles, now=time.time())
            await API_KEYS.set(served.engine, minted.record.key_id, minted.record)
            keys[user] = minted.text
        yield served, keys


async def _state(client: httpx.AsyncClient, sid: str, want: str | None = None) -> str:
    deadline = time.monotonic() + 30
    while True:
        reply = await client.get(f"/v1/sessions/{sid}/state")
        state = str(reply.json()["state"]) if reply.status_code == 200 else ""
        if (want is None and state == "function_awaiting_approval") or state == want:
            return state
        if time.monotonic() > deadline:
            raise AssertionError(f"{sid}: still {state!r}")
        await asyncio.sleep(0.05)


async def test_an_admin_stops_its_tenant_and_only_its_tenant(
    world: tuple[Served, dict[str, str]],
) -> None:
    served, keys = world
    alice, ada, bob, bea = (served.client(token=keys[u]) for u in ("alice", "ada", "bob", "bea"))
    async with alice, ada, bob, bea:
        for client in (alice, bob):
            reply = await client.post("/v1/runs", json={"prompt": "go", "session_id": "s1"})
            assert reply.status_code == 202, reply.text
            await _state(client, "s1")  # parked on fs::write's approval: in flight

        body = {"reason": "prompt injection suspected"}
        forbidden = await alice.post("/v1/tenants/acme/abort-runs", json=body)
        assert forbidden.status_code == 403, forbidden.text
        assert forbidden.json()["error"]["code"] == "forbidden"

        across = await bea.post("/v1/tenants/acme/abort-runs", json=body)
        missing = await bea.post("/v1/tenants/nosuch/abort-runs", json=body)
        assert across.status_code == missing.status_code == 404
        assert across.json()["error"]["code"] == missing.json()["error"]["code"] == "not_found"

        held = await ada.post("/v1/tenants/acme/abort-runs", json=body)
        assert held.status_code == 200, held.text
        answer = held.json()
        assert answer["already_held"] is False
        assert [run["session_id"] for run in answer["aborted"]] == ["acme:s1"]
        assert await _state(alice, "s1", "stopped") == "stopped"
        assert await _state(bob, "s1") == "function_awaiting_approval"  # beta's goes on

        refused = await alice.post("/v1/runs", json={"prompt": "again", "session_id": "s2"})
        assert refused.status_code == 423, refused.text
        error = refused.json()["error"]
        assert error["code"] == "runs_held"
        assert "prompt injection suspected" in error["message"]
        assert "tackroom runs resume --tenant acme" in error["message"]
        other = await bob.post("/v1/runs", json={"prompt": "go", "session_id": "s2"})
        assert other.status_code == 202, other.text

        listed = await ada.get("/v1/tenants/acme/run-holds")
        assert listed.json()["everyone"]["held_by"] == "ada"
        assert (await bea.get("/v1/tenants/acme/run-holds")).status_code == 404

        resumed = await ada.post("/v1/tenants/acme/resume-runs", json={})
        assert resumed.json()["released"] is True
        again = await alice.post("/v1/runs", json={"prompt": "again", "session_id": "s2"})
        assert again.status_code == 202, again.text

    records = (await EXPORT.call(served.engine, ExportRequest(tenant="acme"))).records
    kinds = [(r["kind"], r["actor"]) for r in records if r["kind"].startswith("runs_")]
    assert kinds == [("runs_held", "ada"), ("runs_released", "ada")]


async def test_a_principal_switch_holds_that_principal_only(
    world: tuple[Served, dict[str, str]],
) -> None:
    served, keys = world
    alice, ada = served.client(token=keys["alice"]), served.client(token=keys["ada"])
    async with alice, ada:
        reply = await alice.post("/v1/runs", json={"prompt": "go", "session_id": "mine"})
        assert reply.status_code == 202, reply.text
        await _state(alice, "mine")
        body = {"reason": "her key leaked", "principal": "alice"}
        held = (await ada.post("/v1/tenants/acme/abort-runs", json=body)).json()
        assert [run["principal"] for run in held["aborted"]] == ["alice"]
        refused = await alice.post("/v1/runs", json={"prompt": "go", "session_id": "m2"})
        assert refused.status_code == 423
        allowed = await ada.post("/v1/runs", json={"prompt": "go", "session_id": "a2"})
        assert allowed.status_code == 202, allowed.text

        flows = await ada.get("/v1/audit/flows", params={"source": "http::fetch"})
        assert flows.status_code == 200, flows.text
        assert flows.json()["schema_version"] == 1
        assert flows.json()["runs"] == []
        assert (await ada.get("/v1/audit/flows")).status_code == 422
