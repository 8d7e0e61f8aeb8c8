"""A user's replacement orchestrator drives a turn the console shows correctly: the gateway booted
with ``tests/contract/minimal_orchestrator.py`` in the shipped orchestrator's place (on the
embedded engine, in a thread with an event loop of its own), a run started from the console's
form in Chromium, and what a person sees of it: the echo tool's card with its arguments, done;
the answer; the run finished; the prompt first in the transcript."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tackroom.testing.backends import engine_url_for
from tackroom.testing.contracts.orchestra import ECHO

from ..contract.test_minimal_orchestrator_contract import ANSWER, gateway_over_minimal
from ..workers.gateway.served import TOKEN
from .conftest import GatewayThread, require_chromium

PROMPT = "Echo ping, then tell me what it said."
SESSION = "replaced"


@pytest.fixture
def minimal_console(tmp_path: Path) -> Iterator[str]:
    """The base URL of a gateway over the minimal orchestrator."""
    require_chromium()
    engine_url = engine_url_for("embedded", tmp_path)
    served = GatewayThread(lambda: gateway_over_minimal(engine_url, tmp_path))
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
