"""The worker around the server: its token, its address, its console line, its stop."""

from __future__ import annotations

import asyncio
import signal
import socket
import stat
from pathlib import Path

import pytest

from tackroom.cli.serve import serve_workers
from tackroom.contracts.approvals import REQUEST as APPROVAL_REQUEST
from tackroom.engine import open_engine
from tackroom.harness.wiring import served_config
from tackroom.runtime.config import HarnessConfig
from tackroom.runtime.errors import WorkerStartError
from tackroom.runtime.host import Host
from tackroom.runtime.registry import load_worker
from tackroom.workers.gateway.auth import TokenProblem, load_or_create_token
from tackroom.workers.gateway.worker import GatewayConfig, ports_to_try, resolve_token

from .served import TOKEN, WRITE_THEN_ANSWER, EventReader, gateway_config, serving


def test_a_token_is_generated_once_private_and_then_reused(tmp_path: Path) -> None:
    path = tmp_path / "home" / "gateway-token"
    token, created = load_or_create_token(path)
    assert created
    assert len(token) >= 32
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert load_or_create_token(path) == (token, False)
    config = GatewayConfig(token_path=path)
    assert resolve_token(config) == (token, False)
    assert resolve_token(GatewayConfig(token=TOKEN, token_path=path)) == (TOKEN, False)


def test_a_token_file_open_to_others_or_unusable_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "gateway-token"
    path.write_text("x" * 40)
    path.chmod(0o644)
    with pytest.raises(TokenProblem, match="open to others"):
        load_or_create_token(path)
    path.chmod(0o600)
    path.write_text("short")
    with pytest.raises(TokenProblem, match="no usable token") as caught:
        load_or_create_token(path)
    assert "short" not in str(caught.value)


def test_no_token_means_no_start_and_says_where(tmp_path: Path) -> None:
    with pytest.raises(TokenProblem, match=r"refusing to listen on 0\.0\.0\.0"):
        resolve_token(GatewayConfig(host="0.0.0.0", token_path=None))
    with pytest.raises(ValueError, match="at least 16"):
        GatewayConfig(token="too short")


async def test_a_busy_port_fails_the_start_in_one_line(tmp_path: Path) -> None:
    taken = socket.create_server(("127.0.0.1", 0))
    port = taken.getsockname()[1]
    config = HarnessConfig.defaults().model_copy(
        update={"worker_config": {"gateway": {"port": port, "token": TOKEN}}}
    )
    host = Host(
        engine=open_engine(f"embedded:{tmp_path / 'e.db'}"),
        workers=[load_worker("gateway")],
        config=config,
    )
    try:
        with pytest.raises(WorkerStartError) as caught:
            await host.start()
    finally:
        taken.close()
    assert f"cannot listen on 127.0.0.1:{port}" in str(caught.value)
    assert "\n" not in str(caught.value)


async def test_the_console_line_the_signals_and_a_clean_stop_with_a_stream_open(
    tmp_path: Path,
) -> None:
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    config = gateway_config(tmp_path, f"embedded:{tmp_path / 'e.db'}", script=WRITE_THEN_ANSWER)
    async with serving(config) as served:
        assert [a for a in served.host.announcements if a.startswith("console:")] == [
            f"console: {served.url}/#token={TOKEN}"
        ]
        assert {sig: signal.getsignal(sig) for sig in before} == before
        async with served.client() as client:
            await client.post("/v1/runs", json={"prompt": "go", "session_id": "open"})
            async with client.stream("GET", "/v1/sessions/open/events") as stream:
                events = EventReader(stream)
                await events.read(until="approval_requested")
                reading = asyncio.ensure_future(events.read())
                await asyncio.wait_for(served.host.close(), 10)
                rest = await asyncio.wait_for(reading, 10)  # ended cleanly, not cut
    assert all(e.event != "agent_end" for e in rest)
    assert {sig: signal.getsignal(sig) for sig in before} == before


def test_the_default_port_may_move_to_a_free_one_an_explicit_one_may_not() -> None:
    assert ports_to_try(GatewayConfig()) == range(8787, 8797)
    assert ports_to_try(GatewayConfig(port=8787)) == range(8787, 8788)


def test_tackroom_serve_boots_the_gateway_with_the_agent_unless_disabled() -> None:
    agent = HarnessConfig.defaults()
    workers = serve_workers(agent)
    assert workers[-1] == "gateway"
    assert "gateway" not in serve_workers(agent.model_copy(update={"workers": ["engine"]}))
    off = agent.model_copy(update={"worker_config": {"gateway": {"enabled": False}}})
    assert "gateway" not in serve_workers(off)
    sections = served_config(agent, workers).worker_config
    orchestrator, gateway = sections["orchestrator"] or {}, sections["gateway"] or {}
    assert orchestrator["approvals_function"] == APPROVAL_REQUEST.id
    assert gateway["defaults"]["tools"] == agent.agent.tools
