// The session tree: runs of entries, branches and forks indented under the entry they leave from.

import { api } from "./api.js";
import { blocksText, h, link } from "./dom.js";

const enc = encodeURIComponent;

async function forkAt(entry, note) {
  note.textContent = "forking…";
  try {
    const path = `/v1/sessions/${enc(entry.session_id)}/fork`;
    const created = await api(path, { method: "POST", body: { entry_id: entry.entry_id } });
    location.hash = `#/sessions/${enc(created.session_id)}`;
  } catch (error) {
    note.textContent = error.message;
  }
}

/** Sessions forked from another, by `source session/entry` (the tree holds none of them). */
async function forksByEntry(signal) {
  const { sessions } = await api("/v1/sessions", { signal, query: { limit: 500 } });
  const forks = new Map();
  for (const s of sessions) {
    if (!s.origin || !s.origin.from_entry_id) continue;
    const key = `${s.origin.source_session_id}/${s.origin.from_entry_id}`;
    if (!forks.has(key)) forks.set(key, []);
    forks.get(key).push(s);
  }
  return forks;
}

function forkItem(s) {
  const own = h("span", { class: "muted" }, ` ${s.entry_count} entries of its own`);
  return h("li", { class: "fork", testid: "fork-branch", "data-session-id": s.session_id }, `${s.origin.kind} → `, link(s.session_id, ["sessions", s.session_id, "tree"]), own);
}

function entryItem(entry, tree, note, forks, pinned) {
  const m = entry.message;
  const replaces = entry.type === "compaction" && m.details && Array.isArray(m.details.replaces) ? m.details.replaces : null;
  const text = blocksText(m.content).slice(0, 160) || m.function_id || "";
  const preview = replaces ? `summary of ${replaces.length} entries: ${text}` : text;
  const active = entry.entry_id === tree.leaf_id;
  const branches = (forks.get(`${entry.session_id}/${entry.entry_id}`) || []).filter((s) => s.session_id !== tree.session_id);
  return h(
    "li",
    { class: active ? "entry leaf" : "entry", testid: "tree-entry", "data-entry-id": entry.entry_id, "data-session-id": entry.session_id },
    h("span", { class: "muted" }, `${entry.seq}. ${replaces ? "compaction" : m.role}`),
    " ",
    h("span", { class: "preview" }, preview),
    " ",
    entry.session_id !== tree.session_id ? link(entry.session_id, ["sessions", entry.session_id], { class: "muted" }) : null,
    active ? h("strong", { class: "badge" }, "leaf") : null,
    pinned.has(entry.entry_id) ? h("span", { class: "badge pin", testid: "pin-marker" }, "pinned") : null,
    " ",
    h("button", { type: "button", class: "small", testid: "fork-here", onclick: () => forkAt(entry, note) }, "Fork here"),
    branches.length ? h("ul", { class: "forks", "aria-label": "forks" }, branches.map(forkItem)) : null,
  );
}

function nodeView(node, tree, note, forks, pinned) {
  const run = h("ol", { class: "run" }, node.entries.map((entry) => entryItem(entry, tree, note, forks, pinned)));
  const branches = node.children.map((child) => nodeView(child, tree, note, forks, pinned));
  return h("li", { class: "node" }, run, branches.length ? h("ul", { class: "branches", "aria-label": "branches" }, branches) : null);
}

export async function treePage(main, { signal }, sessionId) {
  const [tree, forks, detail] = await Promise.all([
    api(`/v1/sessions/${enc(sessionId)}/tree`, { signal }),
    forksByEntry(signal),
    api(`/v1/sessions/${enc(sessionId)}`, { signal, query: { limit: 1 } }),
  ]);
  const pinned = new Set(detail.session.pinned || []);
  const note = h("p", { class: "muted", testid: "fork-note", "aria-live": "polite" });
  const help = "Branches and forks are indented under the entry they leave from. Fork here starts a new session sharing the history up to that entry.";
  const roots = tree.roots.map((node) => nodeView(node, tree, note, forks, pinned));
  const body = roots.length ? h("ul", { class: "tree", testid: "tree" }, roots) : h("p", {}, "No entries yet.");
  main.append(h("section", { class: "card" }, h("h2", {}, "Tree of ", link(sessionId, ["sessions", sessionId])), h("p", { class: "muted" }, help), note, body));
}
