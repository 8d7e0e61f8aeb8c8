"""The contract of the gateway's HTTP API (``/v1``, ``docs/gateway.md``), spoken over HTTP only:
the documented JSON shapes, statuses, error codes and SSE stream, so a server that deviates fails.

A replacement server (any language or framework) proves it fits by subclassing
:class:`GatewayApiContract` and overriding its one hook, :meth:`~GatewayApiContract.serve`: an
async context manager that starts the server on the engine at ``engine_url`` and yields a
:class:`GatewaySubject`, its base URL and a bearer credential::

    class TestMyGateway(GatewayApiContract):
        @asynccontextmanager
        async def serve(self, engine_url: str, tmp_path: Path) -> AsyncIterator[GatewaySubject]:
            async with my_server(engine_url) as server:     # and the agent behind it
                yield GatewaySubject(base_url=server.url, token=server.owner_token)

The credential is an owner's (every action on its tenant's sessions). Behind the server, each
session's first run follows :data:`SCRIPT`: the model calls ``fs::write`` (which the gate asks a
person about), then, that call decided, answers :data:`ANSWER`. The shipped ``serve`` boots
:data:`TURN_WORKERS`, the scripted model and the gateway on a free port, wired as ``tackroom
serve`` wires them; each test runs once per engine backend (``embedded``, ``nats``) and waits by
reading the SSE stream to the event awaited (within ``CONTRACT_TIMEOUT``), never by sleeping.
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tackroom.extras import import_extra
from tackroom.harness.wiring import agent_workers, served_config, with_home
from tackroom.runtime.config import SCHEMA_VERSION, AgentSettings, HarnessConfig
from tackroom.runtime.host import Host
from tackroom.testing.contracts.base import CONTRACT_TIMEOUT, OnEveryBackend
from tackroom.testing.waiting import wait_until

import_extra("httpx2", needed_by="the gateway contract suite (tackroom.testing.contracts.gateway)")
import httpx2 as httpx  # noqa: E402

Client = httpx.AsyncClient
__all__ = ["ANSWER", "SCRIPT", "GatewayApiContract", "GatewaySubject", "SseReader", "check_error"]

ANSWER = "I wrote the note you asked for, and this is my answer."
"""What the model answers once its ``fs::write`` call is decided."""

_WRITE = {"function_id": "fs::write", "arguments": {"path": "note.txt", "content": "hi"}}
SCRIPT: list[dict[str, Any]] = [{"tool_calls": [_WRITE]}, {"text": ANSWER, "deltas": "words"}]
"""Each session's first run: a call that waits for a person, then :data:`ANSWER` in deltas."""

TURN_WORKERS = ("engine", "sessions", "orchestrator", "files", "policy", "approvals")
"""The agent workers a run of :data:`SCRIPT` needs with the gate on (the shipped ``serve``)."""

_ROUTES = (
    "POST /v1/runs, POST /v1/sessions/{}/abort, GET /v1/sessions/{}/state, GET /v1/sessions,"
    " GET /v1/sessions/{}, GET /v1/sessions/{}/events, DELETE /v1/sessions/{}, GET /v1/me,"
    " GET /v1/approvals, POST /v1/approvals/{}/{}, GET /v1/health, GET /v1/ready"
)
"""Documented operations the OpenAPI document must hold (path parameters by any name)."""


@dataclass(frozen=True, slots=True)
class GatewaySubject:
    """A running server: where (``http://host:port``, no trailing ``/``) and an owner's token."""

    base_url: str
    token: str


@dataclass(frozen=True, slots=True)
class SseEvent:
    id: str | None
    """``None``: a live event (a delta, a snapshot), which carries no ``id:``."""
    event: str
    data: dict[str, Any]


class SseReader:
    """One open SSE response, read in parts as the WHATWG spec parses an event stream."""

    def __init__(self, response: httpx.Response) -> None:
        self._lines = response.aiter_lines()

    async def read(self, *, until: str | None = None) -> list[SseEvent]:
        """Events until one of type ``until`` (included), or the end of the stream."""
        events: list[SseEvent] = []
        fields: dict[str, str] = {}
        data: list[str] = []
        try:
            async with asyncio.timeout(CONTRACT_TIMEOUT):
                while (line := await anext(self._lines, None)) is not None:
                    name, _, value = line.partition(":")
                    if name == "data":
                        data.append(value.removeprefix(" "))
                    elif name:  # another field; a comment (": heartbeat") has no name
                        fields[name] = value.removeprefix(" ")
                    elif not line:  # the end of an event
                        if data:
                            kind = fields.get("event", "message")
                            parsed = json.loads("\n".join(data))
                            events.append(SseEvent(fields.get("id"), kind, parsed))
                            if kind == until:
                                return events
                        fields, data = {}, []
        except TimeoutError:
            seen = [e.event for e in events]
            pytest.fail(f"no {until or 'end of stream'} in {CONTRACT_TIMEOUT}s after {seen}")
        return events


def _text(message: dict[str, Any]) -> str:
    return "".join(b["text"] for b in message.get("content") or [] if b.get("type") == "text")


def _of(events: list[SseEvent], kind: str) -> list[dict[str, Any]]:
    return [e.data["data"] for e in events if e.event == kind]


def _has(found: Any, keys: str) -> None:
    missing = set(keys.split()) - set(found if isinstance(found, dict) else ())
    assert not missing, f"{found} lacks {sorted(missing)}"


def _json(reply: httpx.Response, status: int = 200) -> Any:
    assert reply.status_code == status, f"not {status}: {reply.status_code} {reply.text}"
    return reply.json()


def check_error(reply: httpx.Response, status: int, code: str) -> str:
    """``status`` and ``{"error": {code, message, details?}}``, its message one line; that."""
    assert list(_json(reply, status)) == ["error"], reply.text
    error = reply.json()["error"]
    assert {"code", "message"} <= set(error) <= {"code", "message", "details"}, error
    assert (error["code"], type(error.get("details", {}))) == (code, dict), error
    message: str = error["message"]
    assert (type(message), bool(message.strip()), "\n" in message) == (str, True, False), error
    assert "Traceback" not in reply.text, error
    return message


class GatewayApiContract(OnEveryBackend):
    """Tests of the ``/v1`` API; a replacement server overrides :meth:`serve`."""

    @asynccontextmanager
    async def serve(self, engine_url: str, tmp_path: Path) -> AsyncIterator[GatewaySubject]:
        """The server under test, on the engine at ``engine_url``, its files under ``tmp_path``
        (shipped: the gateway in front of :data:`TURN_WORKERS` and the scripted model)."""
        token = secrets.token_urlsafe(24)
        agent = AgentSettings(model="scripted:contract", tools=["fs::*"], workers=[*TURN_WORKERS])
        sections = {
            "scripted": {"script": SCRIPT, "per_session": True},
            "gateway": {"port": 0, "token": token, "token_path": None},
            "orchestrator": {"coalesce_chars": 1},  # every delta its own event
        }
        base = HarnessConfig(schema_version=SCHEMA_VERSION, agent=agent, worker_config=sections)
        config = with_home(base, tmp_path, engine=engine_url)
        workers = [*agent_workers(config, provider_worker_name="scripted"), "gateway"]
        async with Host.from_config(served_config(config, workers), workers=workers) as host:
            [line] = [a for a in host.announcements if a.startswith("console: ")]
            url = line.removeprefix("console: ").partition("#")[0].rstrip("/")
            yield GatewaySubject(base_url=url, token=token)

    @pytest.fixture
    async def subject(self, engine_url: str, tmp_path: Path) -> AsyncIterator[GatewaySubject]:
        async with self.serve(engine_url, tmp_path) as subject:
            yield subject

    @pytest.fixture
    async def client(self, subject: GatewaySubject) -> AsyncIterator[Client]:
        async with self.http(subject, subject.token) as client:
            yield client

    def http(self, subject: GatewaySubject, token: str | None) -> Client:
        headers = {} if token is None else {"Authorization": f"Bearer {token}"}
        return Client(base_url=subject.base_url, headers=headers, timeout=CONTRACT_TIMEOUT)

    def session_id(self, name: str) -> str:
        """A session id of the test's own (a server may keep state across tests)."""
        return f"contract-{name}-{uuid.uuid4().hex[:8]}"

    async def start(self, client: Client, session_id: str) -> str:
        """``POST /v1/runs`` (``202``, ``RunResponse``); the run's id."""
        body = {"prompt": "write", "session_id": session_id}
        run = _json(await client.post("/v1/runs", json=body), 202)
        _has(run, "session_id run_id started queued resumed reason events_url")
        assert (run["session_id"], run["started"], run["queued"]) == (session_id, True, False), run
        assert run["events_url"] == f"/v1/sessions/{session_id}/events", run
        assert run["run_id"], run
        return str(run["run_id"])

    @asynccontextmanager
    async def stream(self, client: Client, sid: str, **params: str) -> AsyncIterator[SseReader]:
        """``GET /v1/sessions/SID/events``, open (``last_event_id``: as ``Last-Event-ID``)."""
        cursor = params.pop("last_event_id", None)
        headers = {} if cursor is None else {"Last-Event-ID": cursor}
        url = f"/v1/sessions/{sid}/events"
        async with client.stream("GET", url, params=params, headers=headers) as response:
            assert response.status_code == 200, (await response.aread()).decode()
            assert response.headers["content-type"].startswith("text/event-stream"), response
            yield SseReader(response)

    async def events(
        self, client: Client, sid: str, until: str | None, **params: str
    ) -> list[SseEvent]:
        """The session's events up to one of type ``until``, or to the stream's end."""
        async with self.stream(client, sid, **params) as reader:
            return await reader.read(until=until)

    async def parked(self, client: Client, sid: str) -> tuple[str, dict[str, Any]]:
        """A run started on ``sid`` followed to its approval request: its id, the request's data."""
        run_id = await self.start(client, sid)
        events = await self.events(client, sid, "approval_requested", run_id=run_id)
        assert [e.event for e in events][-1:] == ["approval_requested"], events
        asked: dict[str, Any] = events[-1].data["data"]
        assert asked["function_id"] == "fs::write", asked
        return run_id, asked

    async def decide(self, client: Client, sid: str, call_id: str, decision: str) -> dict[str, Any]:
        """``POST /v1/approvals/SID/CALL`` (``200``, ``DecisionRecord``)."""
        reply = await client.post(f"/v1/approvals/{sid}/{call_id}", json={"decision": decision})
        record: dict[str, Any] = _json(reply)
        _has(record, "schema_version decision reason approver decided_at function_id run_id")
        got = (record["schema_version"], record["decision"], record["session_id"])
        assert (*got, record["function_call_id"]) == (1, decision, sid, call_id), record
        return record

    async def state(self, client: Client, session_id: str) -> dict[str, Any]:
        """``GET /v1/sessions/SID/state`` (``200``, ``TurnStateView``)."""
        view: dict[str, Any] = _json(await client.get(f"/v1/sessions/{session_id}/state"))
        _has(view, "schema_version run_id state turn_count stop_reason error awaiting_approval")
        assert (view["schema_version"], view["session_id"]) == (1, session_id), view
        return view

    async def test_health_and_openapi(self, subject: GatewaySubject, client: Client) -> None:
        async with self.http(subject, None) as anonymous:
            assert _json(await anonymous.get("/v1/health")) == {"status": "ok"}
            assert _json(await anonymous.get("/v1/ready"))["ready"] is True
        document = _json(await client.get("/v1/openapi.json"))
        assert str(document["openapi"]).startswith("3.1"), document.get("openapi")
        paths = {re.sub(r"\{[^}]*\}", "{}", path): ops for path, ops in document["paths"].items()}
        routes = [route.split() for route in _ROUTES.split(", ")]
        missing = [f"{m} {p}" for m, p in routes if m.lower() not in paths.get(p, {})]
        assert not missing, f"the OpenAPI document lacks {missing}"
        _has(_json(await client.get("/v1/me")), "tenant user roles method on_behalf_of actions")

    async def test_no_valid_credential_is_a_401(self, subject: GatewaySubject) -> None:
        wrong = "not-the-token-" + secrets.token_urlsafe(16)
        paths = ("/v1/sessions", "/v1/approvals", "/v1/openapi.json", "/v1/sessions/s1/events")
        async with self.http(subject, None) as anonymous, self.http(subject, wrong) as stranger:
            for client in (anonymous, stranger):
                for path in paths:  # and no error shows the credential it was given
                    assert wrong not in check_error(await client.get(path), 401, "unauthorized")
                check_error(await client.post("/v1/sessions/s1/abort"), 401, "unauthorized")
                body = {"prompt": "go", "session_id": "denied"}
                check_error(await client.post("/v1/runs", json=body), 401, "unauthorized")
        async with self.http(subject, subject.token) as owner:  # and the refused start did not run
            check_error(await owner.get("/v1/sessions/denied"), 404, "session_not_found")

    async def test_bad_requests_get_the_documented_errors(self, client: Client) -> None:
        for body in (b"{nope", b"[1, 2]", b'"prompt"', b"\xff\xfe"):
            check_error(await client.post("/v1/runs", content=body), 400, "invalid_json")
        sid = self.session_id("bad")
        reply = await client.post("/v1/runs", json={"prompt": "x", "session_id": sid, "colour": 1})
        check_error(reply, 422, "invalid_request")
        assert reply.json()["error"]["details"]["field"] == "body.colour", reply.text
        wrong = await client.post("/v1/runs", json={"prompt": ["x"], "session_id": sid})
        assert "body.prompt" in check_error(wrong, 422, "invalid_request")
        check_error(await client.post("/v1/runs", json={"session_id": sid}), 422, "invalid_request")
        check_error(await client.get("/v1/sessions", params={"limit": 0}), 422, "invalid_request")
        for tail in ("", "/events", "/tree"):  # none ran: the session does not exist
            check_error(await client.get(f"/v1/sessions/{sid}{tail}"), 404, "session_not_found")
        check_error(await client.get(f"/v1/sessions/{sid}/state"), 404, "not_found")
        check_error(await client.post(f"/v1/sessions/{sid}/abort"), 404, "not_found")
        reply = await client.post(f"/v1/approvals/{sid}/c1", json={"decision": "allow"})
        check_error(reply, 404, "not_pending")
        check_error(await client.get("/v1/no-such-route"), 404, "not_found")
        check_error(await client.put("/v1/sessions"), 405, "method_not_allowed")

    async def test_a_run_completes_and_its_answer_is_readable(self, client: Client) -> None:
        sid = self.session_id("run")
        run_id, asked = await self.parked(client, sid)
        waiting = await self.state(client, sid)
        assert (waiting["run_id"], waiting["state"]) == (run_id, "function_awaiting_approval")
        parked = [call["function_call_id"] for call in waiting["awaiting_approval"]]
        assert parked == [asked["function_call_id"]], waiting
        record = await self.decide(client, sid, asked["function_call_id"], "allow")
        assert (record["function_id"], record["run_id"]) == ("fs::write", run_id), record
        [end] = _of(await self.events(client, sid, "agent_end", run_id=run_id), "agent_end")
        assert (end["state"], end["stop_reason"]) == ("stopped", "end"), end
        done = await self.state(client, sid)
        assert (done["run_id"], done["state"], done["stop_reason"]) == (run_id, "stopped", "end")
        assert (done["awaiting_approval"], done["error"]) == ([], None), done
        entries = _json(await client.get(f"/v1/sessions/{sid}"))["entries"]
        first, last = entries[0]["message"], entries[-1]["message"]
        assert (first["role"], _text(first)) == ("user", "write"), first
        assert (last["role"], _text(last)) == ("assistant", ANSWER), last

    async def test_a_run_streams_to_its_end_and_resumes_by_id(self, client: Client) -> None:
        sid = self.session_id("sse")
        run_id = await self.start(client, sid)
        async with self.stream(client, sid, run_id=run_id) as reader:
            head = await reader.read(until="approval_requested")
            assert [e.event for e in head][-1:] == ["approval_requested"], head
            await self.decide(client, sid, head[-1].data["data"]["function_call_id"], "allow")
            events = head + await reader.read()  # to the end: the stream closes after agent_end
        names = [e.event for e in events]
        assert (names[0], names[-1]) == ("turn_state_changed", "agent_end"), names
        for event in events:  # stored events have an id, live ones (deltas) none
            _has(event.data, "schema_version type session_id run_id event_id data")
            frame = (event.data["schema_version"], event.data["type"], event.data["session_id"])
            assert (*frame, event.data["run_id"]) == (1, event.event, sid, run_id), event
            live = event.event in ("message_update", "message_snapshot")
            assert (event.id or "").isdigit() != live, event
        stored = [e for e in events if e.id is not None]
        ids = [int(e.id or "") for e in stored]
        assert ids == sorted(set(ids)), f"ids not increasing: {ids}"
        assert len({e.data["event_id"] for e in stored}) == len(stored), "an event came twice"
        wanted = "approval_resolved function_execution_start function_execution_end"
        assert set(wanted.split()) <= set(names), names
        answers = [_text(data["message"]) for data in _of(events, "message_complete")]
        assert answers[-1:] == [ANSWER], answers
        deltas = [data["delta"] for data in _of(events, "message_update")]
        assert (len(deltas) > 1, "".join(deltas).endswith(ANSWER)) == (True, True), deltas
        # from an event's id, a stream gets every stored event after it once, and no other
        cut = next(i for i, e in enumerate(stored) if e.event == "approval_requested")
        after, rest = stored[cut].id or "", [e.data for e in stored[cut + 1 :]]
        resumed = await self.events(client, sid, None, run_id=run_id, last_event_id=after)
        assert [e.data for e in resumed if e.id is not None] == rest, "resumed by Last-Event-ID"

    async def test_sessions_are_listed_searched_and_shown(self, client: Client) -> None:
        first, second = self.session_id("list-a"), self.session_id("list-b")
        await self.parked(client, first)
        await self.parked(client, second)
        page = _json(await client.get("/v1/sessions"))
        _has(page, "sessions next_cursor")
        listed = [s["session_id"] for s in page["sessions"]]
        assert listed.index(second) < listed.index(first), f"not newest first: {listed}"
        info = page["sessions"][listed.index(first)]
        _has(info, "schema_version created_at updated_at display_name entry_count leaf_id pinned")
        assert (info["schema_version"], info["entry_count"] >= 2) == (1, True), info
        found = _json(await client.get("/v1/sessions", params={"q": first.upper()}))
        assert [s["session_id"] for s in found["sessions"]] == [first], found
        detail = _json(await client.get(f"/v1/sessions/{first}"))
        _has(detail, "session entries next_cursor")
        assert (detail["session"]["session_id"], detail["next_cursor"]) == (first, None), detail
        entries = detail["entries"]
        _has(entries[0], "entry_id type message")
        assert [e["message"]["role"] for e in entries[:2]] == ["user", "assistant"], entries
        assert _text(entries[0]["message"]) == "write", entries[0]
        paged = _json(await client.get(f"/v1/sessions/{first}", params={"limit": 1}))
        assert (paged["entries"], paged["next_cursor"]) == (entries[:1], entries[0]["entry_id"])
        params = {"cursor": paged["next_cursor"]}
        rest = _json(await client.get(f"/v1/sessions/{first}", params=params))
        assert rest["entries"] == entries[1:], rest

    async def test_approvals_are_listed_decided_once_and_gone(self, client: Client) -> None:
        sid = self.session_id("approve")
        run_id, asked = await self.parked(client, sid)
        call_id = asked["function_call_id"]
        listed = _json(await client.get("/v1/approvals"))
        assert listed["schema_version"] == 1, listed
        [pending] = [p for p in listed["pending"] if p["session_id"] == sid]
        _has(pending, "schema_version function_call_id reason run_id requested_at expires_at")
        assert (pending["schema_version"], pending["function_call_id"]) == (1, call_id), pending
        assert (pending["function_id"], pending["run_id"]) == ("fs::write", run_id), pending
        assert pending["arguments"] == _WRITE["arguments"], pending
        mine = _json(await client.get("/v1/approvals", params={"session_id": sid}))["pending"]
        assert [p["function_call_id"] for p in mine] == [call_id], mine
        await self.decide(client, sid, call_id, "deny")
        again = await client.post(f"/v1/approvals/{sid}/{call_id}", json={"decision": "allow"})
        check_error(again, 409, "already_decided")
        after = await client.get("/v1/approvals", params={"session_id": sid})
        assert _json(after)["pending"] == [], after.text
        [end] = _of(await self.events(client, sid, "agent_end", run_id=run_id), "agent_end")
        assert (end["state"], end["stop_reason"]) == ("stopped", "end"), end  # answered anyway

    async def test_a_busy_session_refuses_a_run_and_aborts(self, client: Client) -> None:
        sid = self.session_id("abort")
        run_id, _ = await self.parked(client, sid)
        busy = await client.post("/v1/runs", json={"prompt": "again", "session_id": sid})
        check_error(busy, 409, "session_busy")
        aborted = _json(await client.post(f"/v1/sessions/{sid}/abort", json={"reason": "enough"}))
        got = (aborted["session_id"], aborted["aborted"], aborted["state"])
        assert got == (sid, True, "function_awaiting_approval"), aborted
        [end] = _of(await self.events(client, sid, "agent_end", run_id=run_id), "agent_end")
        assert (end["state"], end["stop_reason"]) == ("stopped", "aborted"), end
        view = await self.state(client, sid)
        assert (view["run_id"], view["awaiting_approval"]) == (run_id, []), view
        assert (view["state"], view["stop_reason"]) == ("stopped", "aborted"), view

        async def none_pending() -> bool:
            # The parked calls are withdrawn right after the run's last step commits, so a
            # reader that saw agent_end may still find them for a moment.
            pending = await client.get("/v1/approvals", params={"session_id": sid})
            return not _json(pending)["pending"]

        await wait_until(none_pending, message="the aborted run's approvals are still pending")
        again = _json(await client.post(f"/v1/sessions/{sid}/abort", json={}))
        assert (again["session_id"], again["aborted"]) == (sid, False), again
