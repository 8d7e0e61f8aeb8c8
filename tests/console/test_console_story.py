"""The console tells a run's whole story: each model call with what it was sent, what it
answered and its tokens; every stored event as a line a person reads; the runs of every session
with filters; how to turn budgets on when they are off; nothing missing on load.

With ``TACKROOM_DOCS_SCREENSHOTS=1`` the screenshots of docs/console.md are written again."""

from __future__ import annotations

import copy
import re
import time
import urllib.error
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, Response, expect

from tackroom.contracts.engine import STREAM_READ
from tackroom.contracts.events import EVENTS

from .conftest import (
    CONFIG,
    FINAL_TEXT,
    FIRST_TEXT,
    NOTE,
    SOLO,
    STORY,
    STORY_AGAIN,
    TOKEN,
    Console,
    serving,
    shot,
)

PROMPT = "Tidy my notes into note.txt"


@pytest.fixture(scope="module")
def console() -> Iterator[Console]:
    """A served console with two finished sessions: ``story`` (a run that read a file, wrote
    one after an approval and finished; then a second run) and ``solo`` (one costly answer)."""
    with serving(CONFIG) as served:
        served.workspace(STORY).mkdir(parents=True)
        served.workspace(STORY).joinpath("notes.txt").write_text("buy milk\ncall Ann\n")
        first = served.api("POST", "/v1/runs", {"prompt": PROMPT, "session_id": STORY})
        call = _pending(served, STORY)
        served.api("POST", f"/v1/approvals/{STORY}/{call}", {"decision": "allow"})
        served.wait_for_run_end(STORY, first["run_id"])
        second = served.api("POST", "/v1/runs", {"prompt": "Anything else?", "session_id": STORY})
        served.wait_for_run_end(STORY, second["run_id"])
        solo = served.api("POST", "/v1/runs", {"prompt": "Summarise it all", "session_id": SOLO})
        served.wait_for_run_end(SOLO, solo["run_id"])
        yield served


def _pending(console: Console, session_id: str) -> str:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        for item in console.api("GET", "/v1/approvals")["pending"]:
            if item["session_id"] == session_id:
                call_id: str = item["function_call_id"]
                return call_id
        time.sleep(0.05)
    raise AssertionError(f"no approval pending in {session_id}")


def open_page(page: Page, console: Console, route: str) -> None:
    page.goto(f"{console.url}/#token={TOKEN}")
    expect(page.get_by_test_id("nav-sessions")).to_have_attribute("aria-current", "")
    page.goto(f"{console.url}/#/{route}")


def stored_events(console: Console, session_id: str) -> list[dict[str, Any]]:
    request = {"stream": EVENTS.name, "group_id": session_id, "limit": 1000}
    records: list[dict[str, Any]] = console.bus(STREAM_READ.id, request)["records"]
    return records


def test_every_stored_event_is_a_line_a_person_reads(
    page: Page, console: Console, artifacts: Path
) -> None:
    stored = stored_events(console, STORY)
    assert len(stored) > 20  # two runs, one with a read, a write parked for approval, a write
    open_page(page, console, f"sessions/{STORY}")
    expect(page.get_by_test_id("run-status")).to_have_attribute("data-state", "stopped")
    page.get_by_test_id("events").locator("summary").click()

    lines = page.get_by_test_id("event-line")
    expect(lines).to_have_count(len(stored))  # both runs' events, not the latest run's only
    expect(page.get_by_test_id("event-count")).to_have_text(str(len(stored)))
    assert lines.first.inner_text().startswith(f"#{stored[0]['seq']} ")
    assert lines.last.inner_text().startswith(f"#{stored[-1]['seq']} ")
    log = page.get_by_test_id("event-log")
    assert log.evaluate("e => e.scrollHeight <= e.clientHeight")  # not cut off in a small box
    texts = lines.all_inner_texts()
    assert not any(re.fullmatch(r"#\d+ [a-z_]+", text) for text in texts)  # no bare type names
    assert any(re.search(r"tool call `fs::read` → ok, \d+ ms", t) for t in texts), texts
    assert any("gate: `fs::write` needs approval by policy" in t for t in texts)
    assert any("`fs::write` allowed by owner" in t for t in texts)
    assert f'tool call `fs::write` content="{NOTE}" path=note.txt started' in "\n".join(texts)
    assert any(t.endswith("run finished (end) — 1167 in · 66 out tokens · $0.0091") for t in texts)
    expect(page.get_by_test_id("event-run")).to_have_count(2)
    page.get_by_test_id("events").scroll_into_view_if_needed()
    shot(page, artifacts, "console-events", full_page=True)


def test_each_model_call_shows_its_prompt_completion_and_tokens(
    page: Page, console: Console, artifacts: Path
) -> None:
    """What each call was sent, exactly (recorded by the orchestrator when it made the call):
    the system prompt (collapsed), the tools offered and the messages; then the answer."""
    open_page(page, console, f"sessions/{STORY}")
    calls = page.get_by_test_id("model-call")
    expect(calls).to_have_count(4)
    figures = calls.get_by_test_id("call-figures")
    expect(figures.nth(0)).to_have_text(
        "#1 scripted:demo — 310 in · 24 out tokens · $0.0031 · function_call"
    )
    expect(figures.nth(3)).to_contain_text("480 in · 9 out tokens · $0.0010 · end")
    expect(calls.get_by_test_id("call-exact")).to_have_text(["exact"] * 4)

    first, second = calls.nth(0), calls.nth(1)
    first.locator(":scope > summary").click()
    expect(first.get_by_test_id("call-prompt-message")).to_have_count(1)
    expect(first.get_by_test_id("call-prompt")).to_contain_text(PROMPT)
    expect(first.get_by_test_id("call-completion")).to_contain_text("Let me read the notes first.")
    expect(first.get_by_test_id("call-completion")).to_contain_text(
        'fs__read({"path":"notes.txt"})'
    )
    system = first.get_by_test_id("call-system-prompt")
    expect(system).to_be_hidden()  # collapsed: the messages come first
    first.get_by_test_id("call-system").locator("summary").click()
    expect(system).to_contain_text("Mode: agent")
    expect(first.get_by_test_id("call-tool").filter(has_text="fs__read")).to_have_count(1)
    second.locator(":scope > summary").click()
    second.get_by_test_id("call-system").locator("summary").click()
    sent = second.get_by_test_id("call-prompt-message")
    expect(sent).to_have_count(3)  # the prompt, the read call, its result
    expect(sent.nth(2)).to_contain_text("result of fs::read")
    expect(sent.nth(2)).to_contain_text("buy milk")
    expect(second.get_by_test_id("call-completion")).to_contain_text(FIRST_TEXT)
    expect(calls.nth(2)).to_have_attribute("data-entry-id", re.compile(r"-t3-a$"))
    second.scroll_into_view_if_needed()
    shot(page, artifacts, "console-model-calls")

    listed = console.api("GET", f"/v1/sessions/{STORY}/model-calls")["calls"]
    assert [c["completion"]["content"][0]["text"] for c in listed] == [
        "Let me read the notes first.",
        FIRST_TEXT,
        FINAL_TEXT,
        STORY_AGAIN,
    ]
    assert [len(c["prompt"]) for c in listed] == [1, 3, 5, 7]
    assert len({c["run_id"] for c in listed}) == 2
    assert all(c["exact"] for c in listed)
    assert len({c["system_prompt"] for c in listed}) == 1  # one agent, one system prompt
    assert {"fs__read", "fs__write"} <= {t["name"] for t in listed[0]["tools"]}
    assert all(m["entry_id"] for c in listed for m in c["prompt"])  # all sent as stored


def test_model_calls_of_a_missing_session_are_not_found(console: Console) -> None:
    with pytest.raises(urllib.error.HTTPError) as failed:
        console.api("GET", "/v1/sessions/not-a-session/model-calls")
    assert failed.value.code == 404


def test_runs_across_sessions_with_filters(page: Page, console: Console, artifacts: Path) -> None:
    open_page(page, console, "runs")
    rows = page.get_by_test_id("run-row")
    expect(rows).to_have_count(3)  # story's two runs and solo's, newest first
    expect(rows.first.get_by_test_id("run-session-link")).to_have_text(SOLO)
    expect(rows.first.get_by_test_id("run-cost")).to_have_text("$0.2000")
    shot(page, artifacts, "console-runs")

    page.get_by_test_id("filter-tool").fill("fs::write")
    page.get_by_test_id("runs-apply").click()
    expect(rows).to_have_count(1)
    expect(rows.first.get_by_test_id("run-tools")).to_have_text("fs::read, fs::write")
    page.get_by_test_id("filter-tool").fill("")
    page.get_by_test_id("filter-min_cost").fill("0.1")
    page.get_by_test_id("runs-apply").click()
    expect(rows).to_have_count(1)
    expect(rows.first.get_by_test_id("run-session-link")).to_have_text(SOLO)
    page.get_by_test_id("filter-min_cost").fill("")
    page.get_by_test_id("filter-status").select_option("failed")
    page.get_by_test_id("runs-apply").click()
    expect(rows).to_have_count(0)
    expect(page.get_by_test_id("runs-note")).to_have_text("0 runs from 2 sessions")

    def runs(query: str) -> list[str]:
        found = console.api("GET", f"/v1/runs?{query}")["runs"]
        return [f"{run['session_id']}:{run['status']}" for run in found]

    assert runs("status=stopped") == [f"{SOLO}:stopped", f"{STORY}:stopped", f"{STORY}:stopped"]
    assert runs("model=SCRIPTED:demo&tool=fs::*") == [f"{STORY}:stopped"]
    assert runs("principal=owner&max_cost=0.01") == [f"{STORY}:stopped", f"{STORY}:stopped"]
    assert runs("principal=someone-else") == []
    assert runs("since=2001-01-01T00:00:00Z&limit=1") == [f"{SOLO}:stopped"]
    assert runs(f"until={time.time() - 3600:.0f}") == []
    with pytest.raises(urllib.error.HTTPError) as failed:
        console.api("GET", "/v1/runs?status=sleeping")
    assert failed.value.code == 422
    spec = console.api("GET", "/v1/openapi.json")["paths"]["/v1/runs"]["get"]
    assert {p["name"] for p in spec["parameters"]} >= {
        *("status", "model", "tool", "principal", "min_cost", "since", "until"),
    }


def test_nothing_is_missing_on_load(page: Page, console: Console) -> None:
    answers: list[Response] = []
    failed: list[str] = []
    page.on("response", lambda answer: answers.append(answer))
    page.on("requestfailed", lambda request: failed.append(f"{request.failure} {request.url}"))
    for route in ("sessions", f"sessions/{STORY}", "runs", "approvals", "budgets"):
        open_page(page, console, route)
        expect(page.get_by_test_id("main").locator("h2").first).to_be_visible()
        page.wait_for_load_state("networkidle")
    errors = [f"{answer.status} {answer.url}" for answer in answers if answer.status >= 400]
    assert errors == []
    assert [f for f in failed if "ERR_ABORTED" not in f] == []  # a page left ends its requests
    # a browser without an icon named asks /favicon.ico, which the gateway does not serve
    expect(page.locator("link[rel=icon]")).to_have_count(1)
    icon = page.locator("link[rel=icon]").evaluate("link => link.href")
    assert page.request.get(icon).status == 200


@pytest.fixture(scope="module")
def lean_console() -> Iterator[Console]:
    """A served console without the budget worker."""
    config = copy.deepcopy(CONFIG)
    config["agent"]["workers"].remove("budget")
    for key in ("budget_check_function", "budget_record_function", "budget_workspace"):
        del config["worker_config"]["orchestrator"][key]
    with serving(config) as served:
        yield served


def test_budgets_off_says_how_to_turn_them_on(
    page: Page, lean_console: Console, artifacts: Path
) -> None:
    open_page(page, lean_console, "budgets")
    off = page.get_by_test_id("budgets-off")
    expect(off).to_contain_text("Budgets are off")
    config = off.get_by_test_id("budgets-config")
    expect(config).to_contain_text("budget_check_function: budget::check")
    expect(config).to_contain_text("budget_record_function: budget::record")
    expect(page.get_by_test_id("error")).to_have_count(0)
    shot(page, artifacts, "console-budgets-off")


def test_a_session_title_shows_and_is_edited_in_place(
    page: Page, console: Console, artifacts: Path
) -> None:
    open_page(page, console, "sessions")
    row = page.locator(f"[data-testid=session-row][data-session-id={STORY}]")
    expect(row.get_by_test_id("session-title-cell")).to_have_text(PROMPT)  # its first prompt

    row.get_by_test_id("session-link").click()
    expect(page.get_by_test_id("session-title")).to_have_text(PROMPT)
    page.get_by_test_id("title-edit").click()
    expect(page.get_by_test_id("title-input")).to_be_focused()
    expect(page.get_by_test_id("title-input")).to_have_value(PROMPT)
    page.get_by_test_id("title-input").fill("Notes, tidied")
    shot(page, artifacts, "console-title-edit")
    page.get_by_test_id("title-input").press("Enter")
    expect(page.get_by_test_id("session-title")).to_have_text("Notes, tidied")
    expect(page.get_by_test_id("title-input")).to_be_hidden()
    assert console.api("GET", f"/v1/sessions/{STORY}")["session"]["title"] == "Notes, tidied"

    page.get_by_test_id("title-edit").click()
    page.get_by_test_id("title-input").fill("   ")
    page.get_by_test_id("title-input").press("Enter")
    expect(page.get_by_test_id("title-note")).not_to_be_empty()  # the gateway's one line
    page.get_by_test_id("title-input").press("Escape")
    expect(page.get_by_test_id("session-title")).to_have_text("Notes, tidied")

    page.get_by_test_id("nav-sessions").click()
    expect(row.get_by_test_id("session-title-cell")).to_have_text("Notes, tidied")
