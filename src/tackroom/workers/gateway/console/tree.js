// The session tree: runs of entries, forks indented under the entry they branch from.

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

function entryItem(entry, tree, note) {
  const m = entry.message;
  const preview = blocksText(m.content).slice(0, 160) || m.function_id || "";
  const active = entry.entry_id === tree.leaf_id;
  return h(
    "li",
    { class: active ? "entry leaf" : "entry", testid: "tree-entry", "data-entry-id": entry.entry_id, "data-session-id": entry.session_id },
    h("span", { class: "muted" }, `${entry.seq}. ${m.role}`),
    " ",
    h("span", { class: "preview" }, preview),
    " ",
    entry.session_id !== tree.session_id ? link(entry.session_id, ["sessions", entry.session_id], { class: "muted" }) : null,
    active ? h("strong", { class: "badge" }, "leaf") : null,
    " ",
    h("button", { type: "button", class: "small", testid: "fork-here", onclick: () => forkAt(entry, note) }, "Fork here"),
  );
}

function nodeView(node, tree, note) {
  return h(
    "li",
    { class: "node" },
    h("ol", { class: "run" }, node.entries.map((entry) => entryItem(entry, tree, note))),
    node.children.length ? h("ul", { class: "forks", "aria-label": "forks" }, node.children.map((child) => nodeView(child, tree, note))) : null,
  );
}

export async function treePage(main, { signal }, sessionId) {
  const tree = await api(`/v1/sessions/${enc(sessionId)}/tree`, { signal });
  const note = h("p", { class: "muted", testid: "fork-note", "aria-live": "polite" });
  main.append(
    h(
      "section",
      { class: "card" },
      h("h2", {}, "Tree of ", link(sessionId, ["sessions", sessionId])),
      h("p", { class: "muted" }, "Each fork branches off the entry above it. Fork here starts a new session sharing the history up to that entry."),
      note,
      tree.roots.length ? h("ul", { class: "tree", testid: "tree" }, tree.roots.map((node) => nodeView(node, tree, note))) : h("p", {}, "No entries yet."),
    ),
  );
}
