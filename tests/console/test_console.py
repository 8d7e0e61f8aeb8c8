"""The web console in Chromium against a real ``tackroom serve``: start a run from the page,
watch its tokens arrive, approve its parked write, see it finish; fork from the tree; decide on
the approvals page; budgets and a trace's waterfall."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.sync_api import Page, Route, expect

from tackroom.contracts import approvals, sessions
from tackroom.contracts.context import COMPACTION_TYPE, CompactionDetails

from .conftest import BUDGET_CAP, FINAL_TEXT, FIRST_TEXT, NOTE, QUICK_TEXT, TOKEN, Console

XSS = '<img src=x onerror="window.__xss = 1">'
PROMPT = f"Write a note {XSS} please"


def open_console(page: Page, console: Console) -> None:
    page.goto(f"{console.url}/#token={TOKEN}")
    expect(page.get_by_test_id("nav-sessions")).to_have_attribute("aria-current", "")


def text_nodes(page: Page, test_id: str, nth: int) -> int:
    """How many text nodes an element was built from (each delta appends one)."""
    count: int = page.get_by_test_id(test_id).nth(nth).evaluate("e => e.childNodes.length")
    return count


def test_the_token_moves_from_the_url_into_session_storage(page: Page, console: Console) -> None:
    open_console(page, console)

    assert TOKEN not in page.url
    assert page.url.endswith("#/sessions")
    assert page.evaluate("sessionStorage.getItem('tackroom.token')") == TOKEN


def test_a_wrong_token_asks_again(page: Page, console: Console) -> None:
    page.goto(f"{console.url}/#token=not-the-token-at-all")

    expect(page.get_by_test_id("token-form")).to_contain_text("refused")
    page.get_by_test_id("token-input").fill(TOKEN)
    page.get_by_test_id("token-submit").click()
    expect(page.get_by_test_id("sessions")).to_be_visible()


def test_run_approve_finish_and_fork(page: Page, console: Console, artifacts: Path) -> None:
    open_console(page, console)
    page.get_by_test_id("run-prompt").fill(PROMPT)
    page.get_by_test_id("run-session").fill("console-demo")
    page.get_by_test_id("run-start").click()
    expect(page).to_have_url(re.compile(r"#/sessions/console-demo$"))

    # parked on the write: the first answer streamed in word by word, the final one not yet
    card = page.get_by_test_id("tool-call")
    expect(card.get_by_test_id("tool-status")).to_have_text("needs approval")
    expect(card.get_by_test_id("tool-args")).to_contain_text(NOTE)
    expect(card.get_by_test_id("gate-decision")).to_contain_text("needs_approval")
    # (the page may have joined mid-answer: a snapshot, then the words after it)
    expect(page.get_by_test_id("answer-text")).to_have_text([FIRST_TEXT])
    expect(page.get_by_test_id("run-status")).to_have_text("waiting for approval")
    assert not console.workspace("console-demo").joinpath("note.txt").exists()
    page.screenshot(path=artifacts / "01-waiting-for-approval.png")

    card.get_by_test_id("approve").click()
    expect(page.get_by_test_id("run-status")).to_have_attribute("data-state", "stopped")
    expect(page.get_by_test_id("answer-text")).to_have_text([FIRST_TEXT, FINAL_TEXT])
    assert text_nodes(page, "answer-text", 1) == len(FINAL_TEXT.split())
    expect(card.get_by_test_id("tool-status")).to_have_text("done")
    expect(page.get_by_test_id("run-usage")).to_contain_text("280 in · 42 out tokens · $0.0060")
    assert console.workspace("console-demo").joinpath("note.txt").read_text() == NOTE

    # the prompt's markup is shown as text, never parsed
    expect(page.get_by_test_id("entry-text").first).to_have_text(PROMPT)
    assert page.locator("main img").count() == 0
    assert page.evaluate("window.__xss") is None
    page.screenshot(path=artifacts / "02-run-finished.png", full_page=True)

    page.get_by_test_id("open-tree").click()
    entries = page.get_by_test_id("tree-entry")
    expect(entries).to_have_count(4)  # the prompt, the call, its result, the answer
    entries.first.get_by_test_id("fork-here").click()

    expect(page).to_have_url(re.compile(r"#/sessions/(?!console-demo)[^/]+$"))
    fork = page.url.rpartition("/")[2]
    expect(page.get_by_test_id("session-origin")).to_contain_text("fork of console-demo")
    expect(page.get_by_test_id("entry-text")).to_have_text([PROMPT])

    page.goto(f"{console.url}/#/sessions/console-demo/tree")
    branch = entries.first.get_by_test_id("fork-branch")
    expect(branch).to_have_attribute("data-session-id", fork)
    expect(entries.nth(1).get_by_test_id("fork-branch")).to_have_count(0)
    page.screenshot(path=artifacts / "03-tree.png")


def test_allow_for_session_on_the_approvals_page(
    page: Page, console: Console, artifacts: Path
) -> None:
    started = console.api("POST", "/v1/runs", {"prompt": "write it", "session_id": "second"})
    open_console(page, console)
    page.get_by_test_id("nav-approvals").click()

    row = page.locator("[data-testid=approval-row][data-session-id=second]")
    expect(row.get_by_test_id("approval-args")).to_contain_text(NOTE)
    page.screenshot(path=artifacts / "04-approvals.png")
    row.get_by_test_id("allow-session").click()
    expect(row.get_by_test_id("decision-note")).to_have_text("allow (for this session)")

    end = console.wait_for_run_end("second", started["run_id"])
    assert end["data"]["state"] == "stopped"
    assert console.workspace("second").joinpath("note.txt").read_text() == NOTE
    settings = console.bus(approvals.GET_SETTINGS.id, {"session_id": "second"})
    assert "fs::write" in settings["allowed_functions"]
    expect(row).to_have_count(0)


def test_budgets_show_usage_bars(page: Page, console: Console, artifacts: Path) -> None:
    started = console.api("POST", "/v1/runs", {"prompt": "quick one", "session_id": "quick"})
    console.wait_for_run_end("quick", started["run_id"])
    open_console(page, console)
    page.get_by_test_id("nav-budgets").click()

    row = page.locator("[data-testid=budget-row][data-budget-id=console]")
    expect(row.get_by_test_id("budget-figures")).to_contain_text(f"of ${BUDGET_CAP:.4f}")
    filled = int(row.get_by_test_id("budget-bar").get_attribute("aria-valuenow") or "0")
    assert filled >= 20  # the quick run alone spent $0.01 of $0.05
    page.screenshot(path=artifacts / "05-budgets.png")


def test_a_trace_as_a_waterfall(page: Page, console: Console, artifacts: Path) -> None:
    started = console.api("POST", "/v1/runs", {"prompt": "trace me", "session_id": "traced"})
    console.wait_for_run_end("traced", started["run_id"])
    trace = console.wait_for_trace(started["run_id"], spans=3)
    open_console(page, console)
    page.goto(f"{console.url}/#/sessions/traced")
    expect(page.get_by_test_id("answer-text")).to_have_text([QUICK_TEXT])

    page.locator(f"[data-testid=trace-link][href$='{trace['trace_id']}']").click()
    bars = page.get_by_test_id("span-bar")
    expect(bars.first).to_be_visible()
    assert bars.count() >= 3
    failed = page.locator("[data-testid=span-bar][data-status=error]")
    assert failed.count() >= min(1, trace["error_count"])
    assert failed.evaluate_all("bars => bars.every(b => b.classList.contains('error'))")
    bars.first.click()
    expect(page.get_by_test_id("span-attributes")).to_contain_text('"session.id": "traced"')
    page.screenshot(path=artifacts / "06-trace.png")


def test_sessions_newest_first_and_search(page: Page, console: Console, artifacts: Path) -> None:
    started = console.api("POST", "/v1/runs", {"prompt": "hi", "session_id": "searchable-one"})
    console.wait_for_run_end("searchable-one", started["run_id"])
    open_console(page, console)

    rows = page.get_by_test_id("session-row")
    expect(rows.first).to_have_attribute("data-session-id", "searchable-one")
    assert rows.count() > 1
    page.screenshot(path=artifacts / "07-sessions.png")
    page.get_by_test_id("session-search").fill("SEARCHABLE")
    expect(rows).to_have_count(1)
    expect(rows.first.get_by_test_id("session-link")).to_have_text("searchable-one")


def test_a_dropped_stream_resumes_after_the_last_event(page: Page, console: Console) -> None:
    """The first connection ends after three events; the page reconnects with Last-Event-ID
    and shows every event once."""
    started = console.api("POST", "/v1/runs", {"prompt": "hi", "session_id": "resumed"})
    console.wait_for_run_end("resumed", started["run_id"])
    first_three, third = console.raw_events("resumed", count=3)
    resumed_after: list[str | None] = []

    def events(route: Route) -> None:
        if not resumed_after and "last-event-id" not in route.request.headers:
            resumed_after.append(None)
            route.fulfill(status=200, content_type="text/event-stream", body=first_three)
        else:
            resumed_after.append(route.request.headers.get("last-event-id"))
            route.continue_()

    page.route("**/v1/sessions/resumed/events", events)
    open_console(page, console)
    page.goto(f"{console.url}/#/sessions/resumed")

    expect(page.get_by_test_id("run-status")).to_have_attribute("data-state", "stopped")
    assert resumed_after == [None, third]
    expect(page.get_by_test_id("answer-text")).to_have_text([QUICK_TEXT])
    # deltas are live only: a page opened after the run shows the stored answer whole
    assert text_nodes(page, "answer-text", 0) == 1


def test_pin_from_the_transcript_and_a_compaction_says_what_it_replaced(
    page: Page, console: Console, artifacts: Path
) -> None:
    started = console.api("POST", "/v1/runs", {"prompt": "pin me", "session_id": "curated"})
    console.wait_for_run_end("curated", started["run_id"])
    # the prompt, then the answer (or the budget's stop note, once earlier tests spent the cap)
    entries = console.api("GET", "/v1/sessions/curated")["entries"]
    question, second = entries[0]["entry_id"], entries[1]["entry_id"]
    # a compaction entry as the compactor appends one: a summary naming the entries it stands for
    details = CompactionDetails(
        replaces=[question, second],
        first_kept_entry_id=second,
        provider="scripted",
        model="demo",
        tokens_before=40,
        tokens_after=5,
        reason="manual",
    )
    message = {
        "role": "custom",
        "custom_type": COMPACTION_TYPE,
        "content": [{"type": "text", "text": "They said hello."}],
        "details": details.model_dump(mode="json"),
    }
    console.bus(
        sessions.APPEND.id,
        {"session_id": "curated", "entry_id": "compaction-1", "message": message},
    )
    open_console(page, console)
    page.goto(f"{console.url}/#/sessions/curated")

    first = page.locator(f"[data-testid=entry][data-entry-id='{question}']")
    expect(first.get_by_test_id("pin-marker")).to_have_count(0)
    first.get_by_test_id("pin-entry").click()
    expect(first.get_by_test_id("pin-marker")).to_have_text("pinned")
    assert console.api("GET", "/v1/sessions/curated")["session"]["pinned"] == [question]
    summary = page.locator("[data-testid=entry][data-type=compaction]")
    expect(summary.get_by_test_id("entry-kind")).to_contain_text(
        f"summary of 2 entries ({question}, {second})"
    )
    expect(summary.get_by_test_id("entry-text")).to_have_text("They said hello.")
    expect(summary.get_by_test_id("pin-entry")).to_have_count(0)  # a summary is not pinnable
    page.screenshot(path=artifacts / "08-pinned-and-compaction.png", full_page=True)

    page.get_by_test_id("open-tree").click()
    pinned = page.locator(f"[data-testid=tree-entry][data-entry-id='{question}']")
    expect(pinned.get_by_test_id("pin-marker")).to_have_text("pinned")
    compaction = page.locator("[data-testid=tree-entry][data-entry-id=compaction-1]")
    expect(compaction).to_contain_text("summary of 2 entries: They said hello.")

    page.goto(f"{console.url}/#/sessions/curated")
    first.get_by_test_id("unpin-entry").click()
    expect(first.get_by_test_id("pin-entry")).to_be_visible()
    assert console.api("GET", "/v1/sessions/curated")["session"]["pinned"] == []
