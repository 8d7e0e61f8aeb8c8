"""The tenant isolation suite: two tenants and three users through every route of the HTTP API,
on both backends. Another tenant's session must answer exactly as a missing one does, on every
route that names a session (no existence oracle); lists, streams and approvals show a tenant
only its own; roles limit what a user may do; the principal comes from the key, never the body.

The routes are taken from the gateway's own list, so a new route that names a session is
probed as soon as it exists (and this suite fails until it knows a body for it).
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tackroom.contracts.budget import CREATE as BUDGET_CREATE
from tackroom.contracts.identity import API_KEYS, mint_key
from tackroom.runtime.typed import request_for
from tackroom.testing.backends import BACKENDS, engine_url_for
from tackroom.workers.gateway.app import OPERATIONS
from tackroom.workers.gateway.operations import Operation

from .served import TOKEN, WRITE_THEN_ANSWER, gateway_config, serving

USERS = {
    "alice": ("acme", ("member",)),
    "carol": ("acme", ("viewer",)),
    "bob": ("beta", ("member",)),
    "ada": ("acme", ("admin",)),
    "bea": ("beta", ("admin",)),
}

BODIES: dict[str, dict[str, Any] | None] = {
    "abortRun": {"reason": "probe"},
    "getRunState": None,
    "pushMessage": {"kind": "steer", "text": "probe"},
    "getSession": None,
    "getSessionTree": None,
    "forkSession": {"entry_id": "{eid}"},
    "deleteSession": None,
    "setSessionTitle": {"title": "probe"},
    "listModelCalls": None,
    "streamSessionEvents": None,
    "pinEntry": {"entry_id": "{eid}"},
    "unpinEntry": None,
    "compactSession": {},
    "decideApproval": {"decision": "allow"},
}
"""A body for every route with a session in its path (``{eid}``: an entry of the target)."""


@dataclass
class World:
    url: str
    keys: dict[str, str]
    call_id: str
    entry_id: str

    def client(self, user: str) -> httpx.Client:
        key = TOKEN if user == "owner" else self.keys[user]
        return httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {key}"}, timeout=20
        )


def _session_routes() -> list[Operation]:
    return [op for op in OPERATIONS if "{sid}" in op.path]


def _path(op: Operation, sid: str, world: World) -> str:
    return (
        op.path.replace("{sid}", sid)
        .replace("{call_id}", world.call_id)
        .replace("{eid}", world.entry_id)
    )


def _request(client: httpx.Client, op: Operation, sid: str, world: World) -> httpx.Response:
    """``op`` on ``sid``; an event stream is asked with HEAD (the same checks, no endless body)."""
    body = BODIES[op.operation_id]
    if body is not None:
        body = {k: (world.entry_id if v == "{eid}" else v) for k, v in body.items()}
    method = "HEAD" if op.event_stream else op.method
    return client.request(method, _path(op, sid, world), json=body)


def _shape(reply: httpx.Response, sid: str) -> tuple[int, str]:
    """The reply with the id it was asked about taken out (the caller's own words)."""
    text = reply.text.replace(sid, "<ID>")
    return reply.status_code, re.sub(r"\b[a-z0-9_-]+:<ID>", "<ID>", text)


def _await_pending(client: httpx.Client, session_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        pending = client.get("/v1/approvals").json()["pending"]
        mine = [p for p in pending if p["session_id"].endswith(session_id)]
        if mine:
            found: dict[str, Any] = mine[0]
            return found
        time.sleep(0.05)
    raise AssertionError(f"no approval for {session_id} in time")


@pytest.fixture(scope="module", params=list(BACKENDS))
def world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[World]:
    home: Path = tmp_path_factory.mktemp(f"tenants-{request.param}")
    config = gateway_config(home, engine_url_for(request.param, home), script=WRITE_THEN_ANSWER)
    tracing = {"exporter": "bus", "bus": {"flush_interval": 0.1}}  # traces to show, per tenant
    config = config.model_copy(update={"tracing": config.tracing.model_validate(tracing)})
    started = threading.Event()
    found: list[tuple[str, dict[str, str]]] = []
    failures: list[BaseException] = []
    stop: list[asyncio.Event] = []
    loop: list[asyncio.AbstractEventLoop] = []

    async def host() -> None:
        stop.append(asyncio.Event())
        loop.append(asyncio.get_running_loop())
        try:
            async with serving(config) as served:
                keys = {}
                for user, (tenant, roles) in USERS.items():
                    minted = mint_key(tenant=tenant, user=user, roles=roles, now=time.time())
                    await API_KEYS.set(served.engine, minted.record.key_id, minted.record)
                    keys[user] = minted.text
                for tenant in ("acme", "beta"):
                    await BUDGET_CREATE.call(
                        served.engine,
                        request_for(BUDGET_CREATE, scope=f"tenant/{tenant}", cap_usd=5.0),
                    )
                found.append((served.url, keys))
                started.set()
                await stop[0].wait()
        except BaseException as exc:
            failures.append(exc)
            started.set()
            raise

    thread = threading.Thread(target=asyncio.run, args=(host(),), name=f"tenants-{request.param}")
    thread.start()
    started.wait(120)
    try:
        assert found, failures
        url, keys = found[0]
        world = World(url=url, keys=keys, call_id="", entry_id="")
        with world.client("alice") as alice, world.client("bob") as bob:
            for client in (alice, bob):  # the same id in both tenants: two sessions
                reply = client.post("/v1/runs", json={"prompt": "go", "session_id": "shared"})
                assert reply.status_code == 202, reply.text
            world.call_id = _await_pending(alice, "shared")["function_call_id"]
            _await_pending(bob, "shared")
            entries = alice.get("/v1/sessions/shared").json()["entries"]
            world.entry_id = entries[0]["entry_id"]
        yield world
    finally:
        if loop:
            loop[0].call_soon_threadsafe(stop[0].set)
        thread.join(60)


def test_every_route_that_names_a_session_is_probed() -> None:
    assert {op.operation_id for op in _session_routes()} == set(BODIES)


def test_the_same_id_is_two_sessions_in_two_tenants(world: World) -> None:
    with world.client("alice") as alice, world.client("bob") as bob:
        mine = alice.get("/v1/sessions/shared").json()["session"]["session_id"]
        theirs = bob.get("/v1/sessions/shared").json()["session"]["session_id"]
    assert (mine, theirs) == ("acme:shared", "beta:shared")


@pytest.mark.parametrize("op", _session_routes(), ids=lambda op: op.operation_id)
def test_another_tenants_session_answers_as_a_missing_one(world: World, op: Operation) -> None:
    with world.client("bob") as bob:
        for target in ("acme:shared", "shared-but-acme"):
            ghost = f"acme:ghost-{op.operation_id}"
            real = _request(bob, op, target, world)
            missing = _request(bob, op, ghost, world)
            assert real.status_code == 404 or real.status_code == missing.status_code, real.text
            assert real.status_code not in range(200, 300), real.text
            assert _shape(real, target) == _shape(missing, ghost)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    op=st.sampled_from(_session_routes()),
    sid=st.one_of(
        st.sampled_from(["acme:shared", "shared", "beta:shared", ":shared", "default:shared"]),
        st.from_regex(r"\A(acme:)?[A-Za-z0-9_.@-]{1,24}\Z"),
    ),
)
def test_no_id_bob_can_write_reaches_alices_session(world: World, op: Operation, sid: str) -> None:
    """Whatever id bob names, his request touches his tenant's sessions only: alice's stays as
    it was, its approval still pending."""
    with world.client("bob") as bob:
        reply = _request(bob, op, sid, world)
        assert reply.status_code < 500, reply.text
        if op.operation_id in ("getSession", "getSessionTree") and reply.status_code == 200:
            assert "acme:shared" not in reply.text or sid.startswith("acme:") is False
    with world.client("alice") as alice:
        assert alice.get("/v1/sessions/shared").status_code == 200
        assert _await_pending(alice, "shared")["function_call_id"] == world.call_id


def test_lists_show_a_tenant_only_its_own(world: World) -> None:
    """(Bob's own session may have been decided or deleted by the probes above; alice's not.)"""
    with world.client("bob") as bob, world.client("alice") as alice:
        for who, tenant in ((bob, "beta"), (alice, "acme")):
            sessions = who.get("/v1/sessions").json()["sessions"]
            assert all(s["session_id"].startswith(f"{tenant}:") for s in sessions)
            pending = who.get("/v1/approvals").json()["pending"]
            assert all(p["session_id"].startswith(f"{tenant}:") for p in pending)
            named = who.get("/v1/approvals", params={"session_id": "acme:shared"}).json()
            assert all(p["session_id"].startswith(f"{tenant}:") for p in named["pending"])
            traces = who.get("/v1/traces").json()
            assert all(t["session_id"].startswith(f"{tenant}:") for t in traces["traces"])
            runs = who.get("/v1/runs").json()["runs"]
            assert all(r["session_id"].startswith(f"{tenant}:") for r in runs)
        assert alice.get("/v1/runs").json()["runs"]
        assert alice.get("/v1/sessions").json()["sessions"]
        assert alice.get("/v1/approvals").json()["pending"]
        assert not bob.get("/v1/approvals", params={"session_id": "acme:shared"}).json()["pending"]


def test_a_run_bob_starts_on_alices_id_is_his_own(world: World) -> None:
    with world.client("bob") as bob:
        reply = bob.post("/v1/runs", json={"prompt": "go", "session_id": "acme:shared"})
    assert reply.status_code == 202, reply.text
    assert reply.json()["session_id"] == "beta:acme:shared"


def test_roles_limit_what_a_user_may_do(world: World) -> None:
    with world.client("carol") as carol:  # acme, viewer
        assert carol.get("/v1/sessions/shared").status_code == 200
        for method, path, body in (
            ("POST", "/v1/runs", {"prompt": "go"}),
            ("POST", f"/v1/approvals/shared/{world.call_id}", {"decision": "allow"}),
            ("DELETE", "/v1/sessions/shared", None),
            ("GET", "/v1/budgets", None),
        ):
            reply = carol.request(method, path, json=body)
            assert reply.status_code == 403, reply.text
            assert reply.json()["error"]["code"] == "forbidden"


def test_the_principal_comes_from_the_key_not_the_body(world: World) -> None:
    with world.client("alice") as alice:
        named = {"id": "root", "roles": ["admin"], "tenant": "beta"}
        reply = alice.post("/v1/runs", json={"prompt": "go", "principal": named})
        assert reply.status_code == 403, reply.text
        assert "impersonate" in reply.json()["error"]["message"]
        other = alice.post(
            f"/v1/approvals/shared/{world.call_id}", json={"decision": "deny", "approver": "bob"}
        )
        assert other.status_code == 403, other.text


def test_a_bad_credential_is_refused_in_one_line(world: World) -> None:
    for key, said in (
        ("tk_0123456789ab_" + "A" * 43, "unknown API key"),
        ("not-a-known-credential", "needs a credential"),
        (None, "needs a credential"),
    ):
        headers = {} if key is None else {"Authorization": f"Bearer {key}"}
        reply = httpx.get(f"{world.url}/v1/sessions", headers=headers, timeout=20)
        assert reply.status_code == 401, reply.text
        message = reply.json()["error"]["message"]
        assert said in message
        assert "\n" not in message
        assert key is None or key not in reply.text


def test_budgets_are_a_tenants_own(world: World) -> None:
    with world.client("ada") as ada, world.client("bea") as bea:
        for admin, tenant in ((ada, "acme"), (bea, "beta")):
            scopes = [
                view["budget"]["scope"] for view in admin.get("/v1/budgets").json()["budgets"]
            ]
            assert scopes == [f"tenant/{tenant}"]


def test_another_tenants_trace_answers_as_a_missing_one(world: World) -> None:
    with world.client("alice") as alice, world.client("bob") as bob:
        deadline = time.monotonic() + 30
        traces: list[dict[str, Any]] = []
        while not traces and time.monotonic() < deadline:
            traces = alice.get("/v1/traces", params={"session_id": "shared"}).json()["traces"]
            time.sleep(0.1)
        assert traces, "alice's run left no trace"
        trace_id = traces[0]["trace_id"]
        assert alice.get(f"/v1/traces/{trace_id}").status_code == 200
        real = bob.get(f"/v1/traces/{trace_id}")
        ghost = "0" * 32
        missing = bob.get(f"/v1/traces/{ghost}")
        assert real.status_code == 404, real.text
        assert _shape(real, trace_id) == _shape(missing, ghost)


def test_every_entry_a_run_writes_names_its_principal(world: World) -> None:
    with world.client("alice") as alice:
        tree = alice.get("/v1/sessions/shared/tree").json()
    entries = [entry for root in tree["roots"] for entry in _entries(root)]
    assert entries
    for entry in entries:
        assert (entry["principal"]["tenant"], entry["principal"]["id"]) == ("acme", "alice")
        assert entry["principal"]["method"] == "api_key"


def _entries(node: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = list(node["entries"])
    for child in node["children"]:
        found += _entries(child)
    return found
