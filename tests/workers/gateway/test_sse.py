"""The SSE stream: every event once across a disconnect (both backends), the run filter and the
cursor, heartbeats, a client that stops reading dropped."""

from __future__ import annotations

import asyncio
import logging
import socket
from pathlib import Path

import httpx2 as httpx
import pytest

from tackroom.contracts.events import EVENTS
from tackroom.testing import HeldSleep, ScriptedProvider, wait_until

from .served import (
    AUTH,
    WRITE_THEN_ANSWER,
    EventReader,
    Served,
    gateway_config,
    read_events,
    serving,
)


async def test_a_client_that_reconnects_with_last_event_id_gets_every_event_once(
    engine_url: str, tmp_path: Path
) -> None:
    async with serving(gateway_config(tmp_path, engine_url, script=WRITE_THEN_ANSWER)) as served:
        async with served.client() as client:
            started = await client.post(
                "/v1/runs", json={"prompt": "write a.txt", "session_id": "s1"}
            )
            assert started.status_code == 202, started.text
            run_id = started.json()["run_id"]
            async with client.stream("GET", "/v1/sessions/s1/events") as stream:
                assert stream.headers["content-type"].startswith("text/event-stream")
                first = await read_events(stream, until="approval_requested")
            # the client is gone; the run goes on without it once the call is allowed
            call_id = first[-1].data["data"]["function_call_id"]
            allowed = await client.post(f"/v1/approvals/s1/{call_id}", json={"decision": "allow"})
            assert allowed.status_code == 200, allowed.text
            await wait_until(lambda: _state_is(client, "stopped"))
            resume = {"Last-Event-ID": str(first[-1].id)}
            async with client.stream("GET", "/v1/sessions/s1/events", headers=resume) as stream:
                rest = await read_events(stream)
        stored = await served.engine.read(EVENTS.name, "s1")
    seen = [e for e in first + rest if e.id is not None]
    assert [e.id for e in seen] == [record.seq for record in stored]
    assert [e.data for e in seen] == [record.data for record in stored]
    assert len({e.data["event_id"] for e in seen}) == len(seen)
    assert {e.data["run_id"] for e in seen} == {run_id}
    assert [e.event for e in seen] == [e.data["type"] for e in seen]
    assert seen[-1].event == "agent_end"
    # deltas went to whoever watched, live, without an id: none was stored (a client that
    # connects once the answer has begun gets its snapshot first, live too)
    live = {"message_update", "message_snapshot"}
    assert {e.event for e in first + rest if e.id is None} <= live
    assert not [r for r in stored if r.data["type"] in ("message_update", "message_snapshot")]


async def test_a_client_connecting_mid_answer_gets_a_snapshot_then_the_rest(
    engine_url: str, tmp_path: Path
) -> None:
    answer = "one two three four five six"
    held = HeldSleep(at=4)  # three words out, then the model pauses
    provider = ScriptedProvider(
        [{"text": answer, "deltas": "words", "delay_between_frames": 0.001}], sleep=held
    )
    config = gateway_config(tmp_path, engine_url, script=[])
    async with serving(config, provider=provider) as served, served.client() as client:
        started = await client.post("/v1/runs", json={"prompt": "count", "session_id": "mid"})
        assert started.status_code == 202, started.text
        await asyncio.wait_for(held.reached.wait(), 10)
        await wait_until(lambda: _snapshot_holds(served, "three"))
        async with client.stream("GET", "/v1/sessions/mid/events") as stream:
            reader = EventReader(stream)
            head = await reader.read(until="message_snapshot")
            held.release.set()
            tail = await reader.read()
        stored = await served.engine.read(EVENTS.name, "mid")
    snapshot = head[-1]
    assert snapshot.id is None  # live: not a place to resume from
    assert [e.id for e in head[:-1]] == [r.seq for r in stored[: len(head) - 1]]
    before = "".join(p["text"] for p in snapshot.data["data"]["parts"] if p["kind"] == "text")
    deltas = [e.data["data"] for e in tail if e.event == "message_update"]
    assert all(e.id is None for e in tail if e.event == "message_update")
    assert all(d["index"] > snapshot.data["data"]["through"] for d in deltas)
    assert before + "".join(d["delta"] for d in deltas) == answer
    assert tail[-1].event == "agent_end"
    assert [e.id for e in head + tail if e.id is not None] == [r.seq for r in stored]
    assert "message_update" not in {r.data["type"] for r in stored}


async def _snapshot_holds(served: Served, text: str) -> bool:
    taken = await served.engine.snapshot(EVENTS.name, "mid")
    return bool(taken) and text in str(taken[0].data)


async def _state_is(client: httpx.AsyncClient, state: str) -> bool:
    reply = await client.get("/v1/sessions/s1/state")
    return reply.status_code == 200 and reply.json()["state"] == state


async def test_a_run_filter_ends_after_the_run_and_a_cursor_skips_what_was_seen(
    served: Served,
) -> None:
    async with served.client() as client:
        started = await client.post("/v1/runs", json={"prompt": "go", "session_id": "s2"})
        run_id = started.json()["run_id"]
        url = f"/v1/sessions/s2/events?run_id={run_id}"
        async with client.stream("GET", url) as stream:
            seen = await read_events(stream, until="approval_requested")
        head = [e for e in seen if e.id is not None]  # stored: live deltas have no id
        pending = await client.get("/v1/approvals", params={"session_id": "s2"})
        [call] = pending.json()["pending"]
        denied = await client.post(
            f"/v1/approvals/s2/{call['function_call_id']}", json={"decision": "deny"}
        )
        assert denied.status_code == 200, denied.text
        async with client.stream("GET", f"{url}&after={head[1].id}") as stream:
            tail = await read_events(stream, until=None)  # ends by itself after agent_end
    stored = [e.id for e in tail if e.id is not None]
    assert stored[0] == head[2].id
    assert tail[-1].event == "agent_end"
    assert stored == sorted(set(stored))


async def test_heartbeats_keep_an_idle_stream_alive(tmp_path: Path) -> None:
    config = gateway_config(
        tmp_path,
        f"embedded:{tmp_path / 'e.db'}",
        script=WRITE_THEN_ANSWER,
        gateway={"heartbeat_seconds": 0.05},
    )
    async with serving(config) as served, served.client() as client:
        created = await client.post("/v1/runs", json={"prompt": "go", "session_id": "idle"})
        assert created.status_code == 202

        async def parked() -> bool:  # nothing streams any more, live or stored
            reply = await client.get("/v1/sessions/idle/state")
            state: str | None = reply.json().get("state")
            return state == "function_awaiting_approval"

        await wait_until(parked)
        async with client.stream("GET", "/v1/sessions/idle/events?after=1000") as stream:
            lines = stream.aiter_lines()
            beats = 0
            while beats < 2:
                line = await anext(lines)
                assert not line.startswith(("id:", "data:")), line
                beats += line == ": heartbeat"


async def test_a_client_that_stops_reading_is_dropped_and_memory_stays_bounded(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "tackroom.gateway")
    config = gateway_config(
        tmp_path,
        f"embedded:{tmp_path / 'e.db'}",
        script=WRITE_THEN_ANSWER,
        gateway={"send_timeout_seconds": 0.2},
    )
    async with serving(config) as served:
        async with served.client() as client:
            await client.post("/v1/runs", json={"prompt": "go", "session_id": "slow"})
        reader, writer = await _stalled_client(served, "/v1/sessions/slow/events")
        try:
            frame = {"type": "message_update", "run_id": "x", "data": {"delta": "y" * 8192}}
            appended = 0
            while not _dropped(caplog) and appended < 2000:
                await served.engine.append(EVENTS.name, "slow", frame)
                appended += 1
            await wait_until(lambda: _dropped(caplog), message="the stalled stream was kept")
            for _ in range(100):  # none of these reaches the dropped client
                await served.engine.append(EVENTS.name, "slow", frame)
            received = await asyncio.wait_for(reader.read(), 10)  # up to EOF: it was closed
        finally:
            writer.close()
    assert received.startswith(b"HTTP/1.1 200")
    # what reached the client is what the kernel's socket buffers held when it was dropped
    assert len(received) < appended * 8192


def _dropped(caplog: pytest.LogCaptureFixture) -> bool:
    return any("stopped reading" in record.getMessage() for record in caplog.records)


async def _stalled_client(
    served: Served, path: str
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A raw connection with a tiny receive buffer that asks for ``path`` and never reads."""
    host, _, port = served.url.removeprefix("http://").rpartition(":")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, (host, int(port)))
    reader, writer = await asyncio.open_connection(sock=sock)
    headers = "".join(f"{k}: {v}\r\n" for k, v in AUTH.items())
    writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}\r\n{headers}\r\n".encode())
    await writer.drain()
    return reader, writer
