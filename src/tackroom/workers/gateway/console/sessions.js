// Sessions newest first (search), and one session: transcript, live run, traces, a run form.

import { api } from "./api.js";
import { blocksText, clear, h, link, showError, when } from "./dom.js";
import { livePanel } from "./live.js";

const enc = encodeURIComponent;

/** A form that starts a run (`POST /v1/runs`); `sessionId` fixed, or a field when absent. */
function runForm({ sessionId = null, onStarted }) {
  const prompt = h("textarea", { id: "run-prompt", rows: 3, required: true, testid: "run-prompt" });
  const session = sessionId ? null : h("input", { id: "run-session", testid: "run-session", placeholder: "new session" });
  const note = h("p", { class: "muted", testid: "run-note", "aria-live": "polite" });
  const button = h("button", { type: "submit", testid: "run-start" }, sessionId ? "Send" : "Start run");
  const form = h(
    "form",
    { class: "run-form", testid: "run-form" },
    h("label", { for: "run-prompt" }, sessionId ? "Next prompt" : "Prompt"),
    prompt,
    session ? [h("label", { for: "run-session" }, "Session id (optional)"), session] : null,
    button,
    note,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    button.disabled = true;
    note.textContent = "starting…";
    const body = { prompt: prompt.value };
    const target = sessionId || session.value.trim();
    if (target) body.session_id = target;
    try {
      const started = await api("/v1/runs", { method: "POST", body });
      note.textContent = started.queued ? "queued behind the running run" : `run ${started.run_id} started`;
      prompt.value = "";
      onStarted(started);
    } catch (error) {
      note.textContent = error.message;
    } finally {
      button.disabled = false;
    }
  });
  return form;
}

function sessionRow(s) {
  const origin = s.origin ? `${s.origin.kind} of ${s.origin.source_session_id}` : "";
  return h(
    "tr",
    { testid: "session-row", "data-session-id": s.session_id },
    h("td", {}, link(s.session_id, ["sessions", s.session_id], { testid: "session-link" })),
    h("td", {}, s.display_name || ""),
    h("td", { class: "preview", testid: "session-preview" }, s.last_message_preview || ""),
    h("td", {}, String(s.entry_count)),
    h("td", {}, when(s.updated_at)),
    h("td", { class: "muted" }, origin),
  );
}

export async function sessionsPage(main, { signal }) {
  const search = h("input", { id: "q", type: "search", testid: "session-search", placeholder: "id or title" });
  const rows = h("tbody", { testid: "session-rows" });
  const more = h("button", { type: "button", testid: "sessions-more", hidden: true }, "Load more");
  const status = h("div");
  let cursor = null;
  const load = async (reset) => {
    try {
      const page = await api("/v1/sessions", { signal, query: { q: search.value.trim(), cursor: reset ? null : cursor, limit: 50 } });
      if (reset) clear(rows);
      rows.append(...page.sessions.map(sessionRow));
      cursor = page.next_cursor || null;
      more.hidden = !cursor;
      clear(status);
    } catch (error) {
      if (!signal.aborted) showError(status, error);
    }
  };
  let typing = null;
  search.addEventListener("input", () => {
    clearTimeout(typing);
    typing = setTimeout(() => load(true), 250);
  });
  more.addEventListener("click", () => load(false));
  const columns = ["Session", "Title", "Last message", "Entries", "Updated", "Origin"];
  main.append(
    h("section", { class: "card" }, h("h2", {}, "Start a run"), runForm({ onStarted: (r) => (location.hash = `#/sessions/${enc(r.session_id)}`) })),
    h(
      "section",
      { class: "card" },
      h("h2", {}, "Sessions"),
      h("form", { role: "search", onsubmit: (e) => (e.preventDefault(), load(true)) }, h("label", { for: "q" }, "Search "), search),
      h("table", { testid: "sessions" }, h("thead", {}, h("tr", {}, ...columns.map((c) => h("th", {}, c)))), rows),
      more,
      status,
    ),
  );
  await load(true);
}

function entryView(entry) {
  const m = entry.message;
  const who = m.role === "function_result" ? `result of ${m.function_id}` : m.role;
  return h(
    "article",
    { class: `msg ${m.role}`, testid: "entry", "data-entry-id": entry.entry_id },
    h("header", { class: "muted" }, who),
    h("p", { testid: "entry-text" }, blocksText(m.content) || m.error_message || ""),
  );
}

async function tracesList(sessionId, { signal }) {
  const box = h("div", { testid: "session-traces" });
  try {
    const { traces } = await api("/v1/traces", { signal, query: { session_id: sessionId, limit: 20 } });
    if (!traces.length) box.append(h("p", { class: "muted" }, "No traces yet."));
    const items = traces.map((t) =>
      h(
        "li",
        { class: t.status === "error" ? "error" : "" },
        link(`${t.root_name} — ${t.span_count} spans, ${Math.round(t.duration_ms)} ms`, ["traces", t.trace_id], { testid: "trace-link" }),
        t.run_id ? h("span", { class: "muted" }, ` run ${t.run_id}`) : null,
      ),
    );
    box.append(h("ul", {}, items));
  } catch (error) {
    if (!signal.aborted) box.append(h("p", { class: "muted" }, `Traces unavailable: ${error.message}`));
  }
  return box;
}

export async function sessionPage(main, { signal }, sessionId) {
  const transcript = h("div", { class: "transcript", testid: "transcript" });
  const traces = h("section", { class: "card" }, h("h3", {}, "Traces"));
  const title = h("h2", { testid: "session-title" }, sessionId);
  const origin = h("p", { class: "muted", testid: "session-origin" });
  const more = h("button", { type: "button", testid: "entries-more", hidden: true }, "Load more");
  let cursor = null;

  const loadEntries = async (reset) => {
    const page = await api(`/v1/sessions/${enc(sessionId)}`, { signal, query: { cursor: reset ? null : cursor } });
    if (reset) clear(transcript);
    if (page.session.display_name) title.textContent = `${page.session.display_name} (${sessionId})`;
    const o = page.session.origin;
    origin.textContent = o ? `${o.kind} of ${o.source_session_id}${o.from_entry_id ? ` at ${o.from_entry_id}` : ""}` : "";
    transcript.append(...page.entries.map(entryView));
    cursor = page.next_cursor || null;
    more.hidden = !cursor;
  };
  const refreshTraces = async () => {
    const list = await tracesList(sessionId, { signal });
    traces.replaceChildren(traces.firstChild, list);
  };
  more.addEventListener("click", () => loadEntries(false));

  const live = livePanel(sessionId, {
    signal,
    onRunEnd: () => {
      loadEntries(true).catch(() => {});
      refreshTraces();
    },
  });
  main.append(
    h(
      "section",
      { class: "card" },
      title,
      origin,
      h("p", {}, link("Session tree", ["sessions", sessionId, "tree"], { testid: "open-tree" }), " · ", link("All sessions", ["sessions"])),
    ),
    live,
    h("section", { class: "card" }, runForm({ sessionId, onStarted: () => {} })),
    h("section", { class: "card" }, h("h3", {}, "Transcript"), transcript, more),
    traces,
  );
  try {
    await loadEntries(true);
  } catch (error) {
    if (error.status !== 404) throw error;
    transcript.append(h("p", { class: "muted" }, "No entries yet."));
  }
  await refreshTraces();
}
