// One session: its live run, a prompt form, the transcript of its active path, its runs' traces.

import { api } from "./api.js";
import { showModelCalls } from "./calls.js";
import { blocksText, h, link, when } from "./dom.js";
import { livePanel } from "./live.js";
import { labelBadges, labelClasses } from "./provenance.js";
import { runForm } from "./sessions.js";

const REFRESH_MS = 300; // after a run ends (a replay of many runs refreshes once)

/** What a person may pin: a user message, a note, an answer in text (a call travels with its result). */
function pinnable(type, m) {
  if (type === "compaction") return false;
  if (m.role === "user" || m.role === "custom") return true;
  return m.role === "assistant" && !(m.content || []).some((b) => b.type === "function_call");
}

function kindOf(type, m) {
  const replaces = type === "compaction" && m.details && Array.isArray(m.details.replaces) ? m.details.replaces : null;
  if (replaces) {
    const span = replaces.length > 2 ? `${replaces[0]} … ${replaces[replaces.length - 1]}` : replaces.join(", ");
    return `summary of ${replaces.length} ${replaces.length === 1 ? "entry" : "entries"}${span ? ` (${span})` : ""}`;
  }
  if (m.role === "function_result") return `result of ${m.function_id}`;
  if (m.role === "custom") return m.custom_type;
  return m.role;
}

function entryView({ entry_id, type, message: m }, { pinned, togglePin }) {
  const isPinned = pinned.has(entry_id);
  const marker = isPinned ? h("span", { class: "badge pin", testid: "pin-marker", title: "carried whole into every context" }, "pinned") : null;
  const action = pinnable(type, m) ? h("button", { type: "button", class: "small", testid: isPinned ? "unpin-entry" : "pin-entry", onclick: () => togglePin(entry_id, isPinned) }, isPinned ? "Unpin" : "Pin") : null;
  return h(
    "article",
    { class: `msg ${m.role}${type === "compaction" ? " compaction" : ""}${labelClasses(m.label)}`, testid: "entry", "data-entry-id": entry_id, "data-type": type },
    h("header", { class: "muted", testid: "entry-kind" }, kindOf(type, m), " ", labelBadges(m.label), " ", marker, " ", action),
    h("p", { testid: "entry-text" }, blocksText(m.content) || m.error_message || ""),
  );
}

function traceItem(t) {
  const text = `${t.root_name} — ${t.span_count} spans, ${Math.round(t.duration_ms)} ms`;
  const props = { class: t.status === "error" ? "error" : null };
  return h("li", props, link(text, ["traces", t.trace_id], { testid: "trace-link" }), h("span", { class: "muted" }, ` run ${t.run_id}`));
}

async function tracesOf(sessionId, signal) {
  try {
    const listed = await api("/v1/traces", { signal, query: { session_id: sessionId, limit: 50 } });
    const traces = listed.traces.filter((t) => t.run_id); // its runs', not the reads of this page
    return traces.length ? h("ul", {}, traces.map(traceItem)) : h("p", { class: "muted" }, "No traces of its runs yet.");
  } catch (error) {
    return h("p", { class: "muted" }, `Traces unavailable: ${error.message}`);
  }
}

/** The session's title, and an Edit title button that edits it in place (PATCH). */
function titleEditor(path, sessionId) {
  const title = h("h2", { testid: "session-title" }, sessionId);
  const input = h("input", { testid: "title-input", "aria-label": "Session title", maxlength: 200 });
  const note = h("span", { class: "muted", testid: "title-note", "aria-live": "polite" });
  const edit = h("button", { type: "button", class: "small", testid: "title-edit" }, "Edit title");
  const form = h("form", { class: "title-edit", testid: "title-form", hidden: true }, input, h("button", { type: "submit", class: "small", testid: "title-save" }, "Save"), h("button", { type: "button", class: "small", testid: "title-cancel" }, "Cancel"));
  let current = "";
  const show = (info) => {
    current = info.title || info.display_name || "";
    title.textContent = current || sessionId;
    title.title = current ? sessionId : "";
  };
  const editing = (on) => {
    form.hidden = !on;
    title.hidden = on;
    edit.hidden = on;
    if (on) {
      input.value = current;
      input.focus();
      input.select();
    }
  };
  edit.addEventListener("click", () => editing(true));
  form.querySelector("[data-testid=title-cancel]").addEventListener("click", () => editing(false));
  input.addEventListener("keydown", (event) => event.key === "Escape" && editing(false));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    note.textContent = "";
    try {
      show(await api(path, { method: "PATCH", body: { title: input.value } }));
      editing(false);
    } catch (error) {
      note.textContent = error.message;
    }
  });
  return { show, el: h("div", { class: "title-edit" }, title, form, edit, note) };
}

export async function sessionPage(main, { signal }, sessionId) {
  const path = `/v1/sessions/${encodeURIComponent(sessionId)}`;
  const title = titleEditor(path, sessionId);
  const origin = h("p", { class: "muted", testid: "session-origin" });
  const transcript = h("div", { class: "transcript", testid: "transcript" });
  const traces = h("div", { testid: "session-traces" });
  const calls = h("div", { class: "calls", testid: "model-calls" });
  const more = h("button", { type: "button", testid: "entries-more", hidden: true }, "Load more");
  const pinNote = h("p", { class: "muted", testid: "pin-note", "aria-live": "polite" });
  let cursor = null;
  let pinned = new Set();

  const togglePin = async (entryId, isPinned) => {
    pinNote.textContent = "";
    try {
      const pins = `${path}/pins`;
      if (isPinned) await api(`${pins}/${encodeURIComponent(entryId)}`, { method: "DELETE" });
      else await api(pins, { method: "POST", body: { entry_id: entryId } });
      await loadEntries(true);
    } catch (error) {
      pinNote.textContent = error.message;
    }
  };

  const loadEntries = async (reset) => {
    const page = await api(path, { signal, query: { cursor: reset ? null : cursor } });
    const { origin: o, entry_count: count, updated_at: updated } = page.session;
    title.show(page.session);
    const from = `${sessionId} · ${o ? `${o.kind} of ${o.source_session_id}${o.from_entry_id ? ` at ${o.from_entry_id}` : ""} · ` : ""}`;
    origin.textContent = `${from}${count} ${count === 1 ? "entry" : "entries"} of its own · updated ${when(updated)}`;
    pinned = new Set(page.session.pinned || []);
    const views = page.entries.map((entry) => entryView(entry, { pinned, togglePin }));
    if (reset) transcript.replaceChildren(...views);
    else transcript.append(...views);
    cursor = page.next_cursor || null;
    more.hidden = !cursor;
  };
  const refresh = async () => {
    await loadEntries(true).catch((error) => transcript.replaceChildren(h("p", { class: "muted" }, error.message)));
    await showModelCalls(calls, path, signal);
    traces.replaceChildren(await tracesOf(sessionId, signal));
  };
  more.addEventListener("click", () => loadEntries(false));

  let timer = null;
  const live = livePanel(sessionId, {
    signal,
    onRunEnd: () => {
      clearTimeout(timer);
      timer = setTimeout(refresh, REFRESH_MS);
    },
  });
  signal.addEventListener("abort", () => clearTimeout(timer));
  const links = h("p", {}, link("Session tree", ["sessions", sessionId, "tree"], { testid: "open-tree" }), " · ", link("All sessions", ["sessions"]));
  main.append(
    h("section", { class: "card" }, title.el, origin, links),
    live,
    h("section", { class: "card" }, runForm({ sessionId })),
    h("section", { class: "card" }, h("h3", {}, "Transcript"), pinNote, transcript, more),
    h("section", { class: "card" }, h("h3", {}, "Model calls"), calls),
    h("section", { class: "card" }, h("h3", {}, "Traces of its runs"), traces),
  );
  await refresh();
}
