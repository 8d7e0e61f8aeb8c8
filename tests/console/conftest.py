"""A real ``tackroom serve`` (gateway, agent workers, traces, budget, the scripted model) in a
temporary home, and Debian's Chromium driven by Playwright against its web console.

One server per module (its start is most of the cost); each test opens its own browser context,
so ``sessionStorage`` (the token) starts empty. Screenshots go to ``$TACKROOM_ARTIFACTS/console/``
(default: ``test-artifacts/console/`` at the repository root, ignored by git), which CI keeps.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from playwright.sync_api import Browser, Page, sync_playwright
from sse_starlette.sse import _shutdown_watcher

from tackroom.contracts import budget
from tackroom.runtime import LocalClient

DOCS = Path(__file__).resolve().parents[2] / "docs"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
STARTUP = 30.0
_WATCHER = _shutdown_watcher.__code__
TOKEN = "console-test-token-0123456789"
BUDGET_CAP = 0.05

FIRST_TEXT = "I will write the note now, one word at a time."
FINAL_TEXT = "Done: note.txt now says hello from the console."
NOTE = "hello from the console"
QUICK_TEXT = "A quick answer with no tools at all."
QUICK_SESSIONS = ("quick", "traced", "resumed", "searchable-one", "curated")
STORY, SOLO = "story", "solo"
STORY_AGAIN = "Nothing else to do: the note is written."

SCRIPT: dict[str, Any] = {
    "schema_version": 1,
    "turns": [
        # every session but "quick": text streamed word by word, then a write that asks first
        {
            "text": FIRST_TEXT,
            "delay_between_frames": 0.02,
            "tool_calls": [
                {"function_id": "fs::write", "arguments": {"path": "note.txt", "content": NOTE}}
            ],
            "usage": {"input_tokens": 120, "output_tokens": 30, "cost_usd": 0.004},
        },
        {
            "text": FINAL_TEXT,
            "delay_between_frames": 0.02,
            "usage": {"input_tokens": 160, "output_tokens": 12, "cost_usd": 0.002},
        },
        # these sessions: one answer, no tools
        *(
            {
                "session": session,
                "text": QUICK_TEXT,
                "usage": {"input_tokens": 20, "output_tokens": 8, "cost_usd": 0.01},
            }
            for session in QUICK_SESSIONS
        ),
        # "story": a run that reads a file, asks to write one and finishes; then a second run
        {
            "session": STORY,
            "text": "Let me read the notes first.",
            "tool_calls": [{"function_id": "fs::read", "arguments": {"path": "notes.txt"}}],
            "usage": {"input_tokens": 310, "output_tokens": 24, "cost_usd": 0.0031},
        },
        {
            "session": STORY,
            "text": FIRST_TEXT,
            "tool_calls": [
                {"function_id": "fs::write", "arguments": {"path": "note.txt", "content": NOTE}}
            ],
            "usage": {"input_tokens": 402, "output_tokens": 30, "cost_usd": 0.004},
        },
        {
            "session": STORY,
            "text": FINAL_TEXT,
            "usage": {"input_tokens": 455, "output_tokens": 12, "cost_usd": 0.002},
        },
        {
            "session": STORY,
            "text": STORY_AGAIN,
            "usage": {"input_tokens": 480, "output_tokens": 9, "cost_usd": 0.001},
        },
        # "solo": one answer, no tools, expensive
        {
            "session": SOLO,
            "text": QUICK_TEXT,
            "usage": {"input_tokens": 900, "output_tokens": 300, "cost_usd": 0.2},
        },
    ],
}

CONFIG: dict[str, Any] = {
    "schema_version": 1,
    "engine": "embedded:state/engine.db",
    "endpoint": {"socket": "run/tr.sock"},
    "tracing": {"exporter": "bus", "bus": {"flush_interval": 0.1}},
    "agent": {
        "model": "scripted:demo",
        "tools": ["fs::*"],
        # lean: the workers these pages need (no sandbox, shell or http to boot)
        "workers": [
            *("engine", "sessions", "catalog", "credentials", "directory", "orchestrator"),
            *("files", "policy", "approvals", "budget"),
        ],
    },
    "worker_config": {
        "scripted": {"script_path": "script.yaml", "per_session": True},
        "orchestrator": {
            "coalesce_seconds": 0,  # one message_update per delta: the page shows each
            "budget_check_function": "budget::check",
            "budget_record_function": "budget::record",
            "budget_workspace": "console",
        },
        "gateway": {"port": 0, "token": TOKEN, "token_path": None},
    },
}


@dataclass
class Console:
    """The served console: its URL, its working directory, its local endpoint."""

    url: str
    cwd: Path
    socket: Path

    def api(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.url + path,
            data=data,
            method=method,
            headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=20) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            error.close()  # the error is the response: its connection stays open until closed
            raise

    def raw_events(self, session_id: str, *, count: int) -> tuple[str, str]:
        """The session's first ``count`` events as the stream sends them, and the last id."""
        request = urllib.request.Request(
            f"{self.url}/v1/sessions/{session_id}/events",
            headers={"Authorization": f"Bearer {TOKEN}"},
        )
        text, last_id, seen = "", "", 0
        with urllib.request.urlopen(request, timeout=20) as response:
            for raw in response:
                line = raw.decode()
                text += line
                if line.startswith("id: "):
                    last_id = line.removeprefix("id: ").strip()
                elif line == "\n" and last_id:
                    seen += 1
                    if seen == count:
                        return text, last_id
        raise AssertionError(f"the stream of {session_id} ended after {seen} events")

    def wait_for_run_end(self, session_id: str, run_id: str) -> dict[str, Any]:
        """The run's ``agent_end`` event, read from its SSE stream (which ends after it)."""
        request = urllib.request.Request(
            f"{self.url}/v1/sessions/{session_id}/events?run_id={run_id}",
            headers={"Authorization": f"Bearer {TOKEN}"},
        )
        last: dict[str, Any] = {}
        with urllib.request.urlopen(request, timeout=20) as response:
            for raw in response:
                line = raw.decode().rstrip("\n")
                if line.startswith("data: "):
                    last = json.loads(line.removeprefix("data: "))
                    if last["type"] == "agent_end":
                        return last
        raise AssertionError(f"the stream of {run_id} ended without agent_end (last: {last})")

    def wait_for_trace(self, run_id: str, *, spans: int) -> dict[str, Any]:
        """The run's trace once the store holds ``spans`` of it (they come in batches)."""
        deadline = time.monotonic() + STARTUP
        listed: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            listed = self.api("GET", f"/v1/traces?run_id={run_id}")["traces"]
            if listed and listed[0]["span_count"] >= spans:
                return listed[0]
            time.sleep(0.05)
        raise AssertionError(f"no trace of {spans} spans for {run_id} in {STARTUP} s: {listed}")

    def bus(self, function_id: str, payload: dict[str, Any]) -> Any:
        """Trigger a function through ``tackroom serve``'s local endpoint (in a thread of its
        own: Playwright's sync API keeps an event loop on this one)."""

        async def call() -> Any:
            async with LocalClient(self.socket) as client:
                return await client.trigger(function_id, payload)

        with ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(asyncio.run, call()).result(timeout=20)

    def workspace(self, session_id: str) -> Path:
        return self.cwd / ".tackroom" / "workspaces" / session_id


def _lines(stream: Any, into: queue.Queue[str | None]) -> None:
    for line in stream:
        into.put(line)
    into.put(None)


def _console_url(lines: queue.Queue[str | None]) -> str:
    """The URL of the ``console: http://…/#token=…`` line ``tackroom serve`` prints."""
    seen: list[str] = []
    while True:
        try:
            line = lines.get(timeout=STARTUP)
        except queue.Empty:
            raise AssertionError(f"tackroom serve printed no console line: {seen}") from None
        if line is None:
            raise AssertionError(f"tackroom serve exited: {seen}")
        seen.append(line)
        match = re.match(r"console: (http://\S+?)/#token=", line)
        if match:
            return match[1]


def require_chromium() -> None:
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing (make setup installs Debian's chromium)")


@contextlib.contextmanager
def serving(config: dict[str, Any]) -> Iterator[Console]:
    """``tackroom serve`` with ``config`` (and the script) in a temporary home, until the block
    ends; when it exits early, the error names the tail of its log."""
    require_chromium()
    with (
        tempfile.TemporaryDirectory(prefix="tr-console-") as directory,
        (Path(directory) / "serve.log").open("w") as log,
    ):
        cwd = Path(directory)
        (cwd / "tackroom.yaml").write_text(yaml.safe_dump(config))
        (cwd / "script.yaml").write_text(yaml.safe_dump(SCRIPT))
        with subprocess.Popen(  # its exit closes the stdout pipe
            [sys.executable, "-m", "tackroom.cli.main", "serve"],
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
        ) as proc:
            lines: queue.Queue[str | None] = queue.Queue()
            reader = threading.Thread(target=_lines, args=(proc.stdout, lines), daemon=True)
            reader.start()
            try:
                try:
                    url = _console_url(lines)
                except AssertionError as exc:
                    tail = (cwd / "serve.log").read_text()[-2000:]
                    raise AssertionError(f"{exc}; its log ends: {tail}") from None
                yield Console(url, cwd, cwd / "run" / "tr.sock")
            finally:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(STARTUP)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
                reader.join(STARTUP)


class GatewayThread:
    """A gateway served in process from a thread that owns its event loop: ``serve()`` yields the
    gateway's base URL while it serves; :meth:`start` returns that URL, :meth:`stop` leaves the
    block, ends the loop and joins the thread."""

    def __init__(self, serve: Callable[[], AbstractAsyncContextManager[str]]) -> None:
        self.serve = serve
        self.url: Future[str] = Future()
        self.ended: Future[None] = Future()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.leave: asyncio.Event | None = None
        self.thread = threading.Thread(target=self._run, name="console-gateway")

    def start(self) -> str:
        self.thread.start()
        return self.url.result(timeout=STARTUP)

    def stop(self) -> None:
        if self.loop is not None and self.leave is not None:
            self.loop.call_soon_threadsafe(self.leave.set)
        self.thread.join(STARTUP)
        assert not self.thread.is_alive(), "the gateway's thread did not end"
        self.ended.result(timeout=0)  # what went wrong in it, if anything did

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:
            for future in (self.url, self.ended):
                if not future.done():
                    future.set_exception(exc)
        else:
            self.ended.set_result(None)

    async def _serve(self) -> None:
        self.loop, self.leave = asyncio.get_running_loop(), asyncio.Event()
        async with self.serve() as url:
            self.url.set_result(url)
            await self.leave.wait()
        left = asyncio.all_tasks() - {asyncio.current_task()}
        # sse-starlette's one shutdown watcher per thread, started by the first event stream and
        # owned by no one (it polls for uvicorn's exit until the loop ends): ended here
        watchers = {t for t in left if getattr(t.get_coro(), "cr_code", None) is _WATCHER}
        assert left == watchers, f"tasks left behind by the gateway: {left - watchers}"
        for task in watchers:
            task.cancel()
        await asyncio.gather(*watchers, return_exceptions=True)


@pytest.fixture(scope="module")
def console() -> Iterator[Console]:
    with serving(CONFIG) as served:
        served.bus(
            budget.CREATE.id,
            {"id": "console", "scope": "workspace/console", "cap_usd": BUDGET_CAP},
        )
        yield served


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    require_chromium()
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A page in a fresh context; a script error on it fails the test."""
    context = browser.new_context(viewport={"width": 1200, "height": 820})
    context.set_default_timeout(15_000)
    errors: list[str] = []
    try:
        opened = context.new_page()
        opened.on("pageerror", lambda error: errors.append(str(error)))
        yield opened
    finally:
        context.close()
    assert errors == []


@pytest.fixture(scope="session")
def artifacts() -> Path:
    repository = Path(__file__).resolve().parents[2]
    path = Path(os.environ.get("TACKROOM_ARTIFACTS") or repository / "test-artifacts") / "console"
    path.mkdir(parents=True, exist_ok=True)
    return path


def shot(page: Page, artifacts: Path, name: str, **options: Any) -> None:
    """A screenshot for the test's artifacts, and for docs/ when asked
    (``TACKROOM_DOCS_SCREENSHOTS=1``)."""
    page.screenshot(path=artifacts / f"{name}.png", **options)
    if os.environ.get("TACKROOM_DOCS_SCREENSHOTS") == "1":
        page.screenshot(path=DOCS / f"{name}.png", **options)
