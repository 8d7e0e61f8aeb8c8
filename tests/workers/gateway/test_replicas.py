"""Two gateway processes in front of one NATS engine: ``tackroom serve`` (the agent workers and a
gateway) and ``tackroom worker run gateway`` (a gateway alone). A run started through one is
streamed by both, and its approval is listed by one and decided through the other."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import httpx2 as httpx

from tackroom.contracts.identity import API_KEYS, mint_key
from tackroom.engine import open_engine
from tackroom.testing.cli import tackroom_argv
from tackroom.testing.nats import nats_test_url

from .served import AUTH, TOKEN, WRITE_THEN_ANSWER, EventReader

STARTUP = 60.0


@asynccontextmanager
async def gateway_process(*args: str, cwd: Path) -> AsyncIterator[str]:
    """``tackroom ARGS`` until it printed its console line (whose URL is yielded); SIGTERM on
    the way out, and it must exit 0."""
    proc = await asyncio.create_subprocess_exec(
        *tackroom_argv(*args),
        cwd=cwd,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    try:
        ready = (await asyncio.wait_for(proc.stdout.readline(), STARTUP)).decode()
        assert ready.startswith("tackroom ready"), ready
        console = (await asyncio.wait_for(proc.stdout.readline(), STARTUP)).decode().strip()
        url, _, token = console.removeprefix("console: ").partition("#token=")
        assert token == TOKEN, console
        yield url.rstrip("/")
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(proc.communicate(), STARTUP)
        assert proc.returncode == 0, err.decode()[-2000:]
        assert TOKEN not in err.decode()


def _write_config(path: Path, home: Path, **gateway: object) -> Path:
    config = {
        "schema_version": 1,
        "agent": {"model": "scripted:demo", "tools": ["fs::*"]},
        "worker_config": {
            "gateway": {"port": 0, "token": TOKEN, **gateway},
            "scripted": {"script": WRITE_THEN_ANSWER, "per_session": True},
            "orchestrator": {"coalesce_chars": 1},
            "files": {"workspace_root": str(home / "workspaces")},
            "sandbox": {"workspace_root": str(home / "workspaces")},
            "credentials": {"vault_path": str(home / "credentials.json")},
        },
    }
    path.write_text(json.dumps(config))  # JSON is YAML
    return path


async def test_two_gateways_serve_one_sessions_stream_and_approvals(tmp_path: Path) -> None:
    url = nats_test_url(tmp_path, heartbeat=0.5)
    full = _write_config(tmp_path / "serve.yaml", tmp_path)
    alone = _write_config(tmp_path / "gateway.yaml", tmp_path)
    async with AsyncExitStack() as stack:
        first = await stack.enter_async_context(
            gateway_process("serve", "--engine", url, "--config", str(full), cwd=tmp_path)
        )
        second = await stack.enter_async_context(
            gateway_process(
                "worker", "run", "gateway", "--engine", url, "--config", str(alone), cwd=tmp_path
            )
        )
        assert first != second
        a = await stack.enter_async_context(httpx.AsyncClient(base_url=first, headers=AUTH))
        b = await stack.enter_async_context(httpx.AsyncClient(base_url=second, headers=AUTH))
        started = await b.post("/v1/runs", json={"prompt": "write it", "session_id": "both"})
        assert started.status_code == 202, started.text  # started through the lone gateway
        run_id = started.json()["run_id"]
        path = f"/v1/sessions/both/events?run_id={run_id}"
        stream_a = await stack.enter_async_context(a.stream("GET", path))
        stream_b = await stack.enter_async_context(b.stream("GET", path))
        reader_a, reader_b = EventReader(stream_a), EventReader(stream_b)
        head_a = await reader_a.read(until="approval_requested")
        head_b = await reader_b.read(until="approval_requested")
        listed = await b.get("/v1/approvals", params={"session_id": "both"})
        [pending] = listed.json()["pending"]
        decided = await a.post(
            f"/v1/approvals/both/{pending['function_call_id']}", json={"decision": "allow"}
        )
        assert decided.status_code == 200, decided.text
        tail_a, tail_b = await reader_a.read(), await reader_b.read()
        seen_a, seen_b = head_a + tail_a, head_b + tail_b
        # the stored events, the same through either gateway (live deltas reach each stream
        # from when it connected, without an id)
        stored_a = [(e.id, e.data) for e in seen_a if e.id is not None]
        assert stored_a == [(e.id, e.data) for e in seen_b if e.id is not None]
        assert seen_a[-1].event == "agent_end"
        assert seen_a[-1].data["data"]["state"] == "stopped"
        states = [await c.get("/v1/sessions/both/state") for c in (a, b)]
        assert [s.json()["state"] for s in states] == ["stopped", "stopped"]


async def test_a_users_rate_limit_holds_over_two_gateway_replicas(tmp_path: Path) -> None:
    """The quota worker keeps its counts in the engine: two runs through one gateway spend a
    user's ``requests_per_minute: 2``, a third through the other is a 429 with Retry-After, and
    another user of the same tenant is not held back."""
    url = nats_test_url(tmp_path, heartbeat=0.5)
    full = _write_config(tmp_path / "serve.yaml", tmp_path)
    config = json.loads(full.read_text())
    config["worker_config"]["quota"] = {"default": {"user": {"requests_per_minute": 2}}}
    full.write_text(json.dumps(config))
    alone = _write_config(tmp_path / "gateway.yaml", tmp_path)
    engine = open_engine(url)
    await engine.start()
    keys = {}
    try:
        for user in ("alice", "anna"):
            minted = mint_key(tenant="acme", user=user, roles=("member",), now=time.time())
            await API_KEYS.set(engine, minted.record.key_id, minted.record)
            keys[user] = {"Authorization": f"Bearer {minted.text}"}
    finally:
        await engine.close()
    async with AsyncExitStack() as stack:
        first = await stack.enter_async_context(
            gateway_process("serve", "--engine", url, "--config", str(full), cwd=tmp_path)
        )
        second = await stack.enter_async_context(
            gateway_process(
                "worker", "run", "gateway", "--engine", url, "--config", str(alone), cwd=tmp_path
            )
        )
        a = await stack.enter_async_context(httpx.AsyncClient(base_url=first))
        b = await stack.enter_async_context(httpx.AsyncClient(base_url=second))
        for n in (1, 2):
            started = await a.post("/v1/runs", json={"prompt": "hi"}, headers=keys["alice"])
            assert started.status_code == 202, (n, started.text)
        refused = await b.post("/v1/runs", json={"prompt": "hi"}, headers=keys["alice"])
        assert refused.status_code == 429, refused.text
        assert int(refused.headers["Retry-After"]) >= 1
        error = refused.json()["error"]
        assert error["code"] == "quota_exceeded"
        assert error["details"]["kind"] == "requests_per_minute"
        assert "acme/alice" in error["message"]
        other = await b.post("/v1/runs", json={"prompt": "hi"}, headers=keys["anna"])
        assert other.status_code == 202, other.text
