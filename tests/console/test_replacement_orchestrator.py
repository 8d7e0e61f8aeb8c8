"""A user's replacement orchestrator drives a turn the console shows correctly: the gateway booted
with ``tests/contract/minimal_orchestrator.py`` in the shipped orchestrator's place (on the
embedded engine, in a thread with an event loop of its own), a run started from the console's
form in Chromium, and what a person sees of it: the echo tool's card with its arguments, done;
the answer; the run finished; the prompt first in the transcript."""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect
from sse_starlette.sse import _shutdown_watcher

from tackroom.testing.backends import engine_url_for
from tackroom.testing.contracts.orchestra import ECHO

from ..contract.test_minimal_orchestrator_contract import ANSWER, gateway_over_minimal
from ..workers.gateway.served import TOKEN
from .conftest import STARTUP, require_chromium

PROMPT = "Echo ping, then tell me what it said."
SESSION = "replaced"
_WATCHER = _shutdown_watcher.__code__


class GatewayThread:
    """:func:`gateway_over_minimal` served from a thread that owns its event loop: :meth:`start`
    returns its URL once it serves, :meth:`stop` leaves it, ends the loop and joins the thread."""

    def __init__(self, engine_url: str, home: Path) -> None:
        self.engine_url, self.home = engine_url, home
        self.url: Future[str] = Future()
        self.ended: Future[None] = Future()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.leave: asyncio.Event | None = None
        self.thread = threading.Thread(target=self._run, name="minimal-gateway")

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
        async with gateway_over_minimal(self.engine_url, self.home) as url:
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


@pytest.fixture
def minimal_console(tmp_path: Path) -> Iterator[str]:
    """The base URL of a gateway over the minimal orchestrator."""
    require_chromium()
    served = GatewayThread(engine_url_for("embedded", tmp_path), tmp_path)
    try:
        yield served.start()
    finally:
        served.stop()


def test_the_console_shows_a_turn_of_a_replacement_orchestrator(
    page: Page, minimal_console: str, artifacts: Path
) -> None:
    page.goto(f"{minimal_console}/#token={TOKEN}")
    expect(page.get_by_test_id("nav-sessions")).to_have_attribute("aria-current", "")
    page.get_by_test_id("run-prompt").fill(PROMPT)
    page.get_by_test_id("run-session").fill(SESSION)
    page.get_by_test_id("run-start").click()
    expect(page).to_have_url(re.compile(rf"#/sessions/{SESSION}$"))

    expect(page.get_by_test_id("run-status")).to_have_attribute("data-state", "stopped")
    expect(page.get_by_test_id("run-status")).to_have_text("finished (end)")
    card = page.get_by_test_id("tool-call")
    expect(card).to_have_count(1)
    expect(card.locator("code")).to_have_text(ECHO)
    expect(card.get_by_test_id("tool-args")).to_contain_text('"text": "ping"')
    expect(card.get_by_test_id("gate-decision")).to_contain_text("gate: allow by policy")
    expect(card.get_by_test_id("tool-status")).to_have_text("done")
    expect(card.get_by_test_id("tool-result")).to_contain_text("PING")
    expect(page.get_by_test_id("answer-text")).to_have_text([ANSWER])
    # the transcript (refreshed after the run's end): the prompt first, the answer last
    entries = page.get_by_test_id("entry-text")
    expect(entries).to_have_count(4)  # the prompt, the call, its result, the answer
    expect(entries.first).to_have_text(PROMPT)
    expect(entries.last).to_have_text(ANSWER)
    page.screenshot(path=artifacts / "replacement-orchestrator.png", full_page=True)
