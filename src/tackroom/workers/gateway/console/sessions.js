// Sessions newest first with a search, and the form that starts a run.

import { api } from "./api.js";
import { clear, h, link, showError, when } from "./dom.js";

/** A form that starts a run (`POST /v1/runs`): in `sessionId` (queued if one is running), or in
 * the session named in its own field (a fresh one when left empty). */
export function runForm({ sessionId = null, onStarted = () => {} }) {
  const prompt = h("textarea", { id: "run-prompt", rows: 3, required: true, testid: "run-prompt" });
  const session = sessionId ? null : h("input", { id: "run-session", testid: "run-session", placeholder: "a new session" });
  const note = h("p", { class: "muted", testid: "run-note", "aria-live": "polite" });
  const button = h("button", { type: "submit", testid: "run-start" }, sessionId ? "Send" : "Start run");
  const form = h("form", { class: "run-form", testid: "run-form" }, h("label", { for: "run-prompt" }, sessionId ? "Next prompt" : "Prompt"), prompt);
  if (session) form.append(h("label", { for: "run-session" }, "Session id (optional)"), session);
  form.append(button, note);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    button.disabled = true;
    const body = sessionId ? { prompt: prompt.value, session_id: sessionId, if_busy: "queue" } : { prompt: prompt.value };
    if (session && session.value.trim()) body.session_id = session.value.trim();
    try {
      const started = await api("/v1/runs", { method: "POST", body });
      note.textContent = started.queued ? "queued: it starts when the running run ends" : `run ${started.run_id} started`;
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
  const cells = [
    h("td", {}, link(s.session_id, ["sessions", s.session_id], { testid: "session-link" })),
    h("td", { testid: "session-title-cell" }, s.title || s.display_name || ""),
    h("td", { class: "preview", testid: "session-preview" }, s.last_message_preview || ""),
    h("td", {}, String(s.entry_count)),
    h("td", {}, when(s.updated_at)),
    h("td", { class: "muted" }, s.origin ? `${s.origin.kind} of ${s.origin.source_session_id}` : ""),
  ];
  return h("tr", { testid: "session-row", "data-session-id": s.session_id }, cells);
}

export async function sessionsPage(main, { signal }) {
  const search = h("input", { id: "q", type: "search", testid: "session-search", placeholder: "id or title" });
  const rows = h("tbody", { testid: "session-rows" });
  const more = h("button", { type: "button", testid: "sessions-more", hidden: true }, "Load more");
  const status = h("div");
  let cursor = null;
  const load = async (reset) => {
    try {
      const query = { q: search.value.trim(), cursor: reset ? null : cursor, limit: 50 };
      const page = await api("/v1/sessions", { signal, query });
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
  const head = ["Session", "Title", "Last message", "Entries", "Updated", "Origin"].map((c) => h("th", { scope: "col" }, c));
  const searchForm = h("form", { role: "search", onsubmit: (e) => (e.preventDefault(), load(true)) }, h("label", { for: "q" }, "Search"), search);
  main.append(
    h("section", { class: "card" }, h("h2", {}, "Start a run"), runForm({ onStarted: (r) => (location.hash = `#/sessions/${encodeURIComponent(r.session_id)}`) })),
    h("section", { class: "card" }, h("h2", {}, "Sessions"), searchForm, h("table", { testid: "sessions" }, h("thead", {}, h("tr", {}, head)), rows), more, status),
  );
  await load(true);
}
