// Pending approvals: approve, deny or allow a function for the rest of a session.

import { api } from "./api.js";
import { clear, h, link, pretty, showError, when } from "./dom.js";

const REFRESH_MS = 2000;

/** Approve / Deny / Allow-for-session buttons for one parked call. */
export function decisionButtons(sessionId, callId) {
  const note = h("span", { class: "muted", testid: "decision-note", "aria-live": "polite" });
  const box = h("div", { class: "decide", role: "group", "aria-label": "Decision" });
  const decide = async (decision, always) => {
    for (const button of box.querySelectorAll("button")) button.disabled = true;
    try {
      const path = `/v1/approvals/${encodeURIComponent(sessionId)}/${encodeURIComponent(callId)}`;
      const record = await api(path, { method: "POST", body: { decision, always } });
      note.textContent = `${record.decision}${always ? " (for this session)" : ""}`;
    } catch (error) {
      note.textContent = error.message;
      for (const button of box.querySelectorAll("button")) button.disabled = false;
    }
  };
  box.append(
    h("button", { type: "button", class: "allow", testid: "approve", onclick: () => decide("allow", false) }, "Approve"),
    h("button", { type: "button", class: "deny", testid: "deny", onclick: () => decide("deny", false) }, "Deny"),
    h("button", { type: "button", testid: "allow-session", onclick: () => decide("allow", true) }, "Allow for session"),
    note,
  );
  return box;
}

/** A pending call's row; it stays (with what was decided) until the next refresh drops it. */
function pendingRow(item) {
  return h(
    "tr",
    { testid: "approval-row", "data-session-id": item.session_id, "data-call-id": item.function_call_id },
    h("td", {}, link(item.session_id, ["sessions", item.session_id])),
    h("td", {}, h("code", {}, item.function_id)),
    h("td", {}, h("pre", { testid: "approval-args" }, pretty(item.arguments))),
    h("td", {}, item.reason),
    h("td", {}, when(item.requested_at), h("br"), h("span", { class: "muted" }, "expires " + when(item.expires_at))),
    h("td", {}, decisionButtons(item.session_id, item.function_call_id)),
  );
}

export async function approvalsPage(main, { signal }) {
  const rows = h("tbody", { testid: "approval-rows" });
  const empty = h("p", { class: "muted", testid: "approvals-empty", hidden: true }, "Nothing is waiting for a decision.");
  const status = h("div");
  const shown = new Map(); // session/call -> its row, kept while pending (a refresh keeps a click's state)
  const refresh = async () => {
    try {
      const { pending } = await api("/v1/approvals", { signal });
      const keys = pending.map((item) => `${item.session_id}/${item.function_call_id}`);
      pending.forEach((item, i) => shown.has(keys[i]) || shown.set(keys[i], pendingRow(item)));
      for (const key of shown.keys()) if (!keys.includes(key)) shown.delete(key);
      rows.replaceChildren(...keys.map((key) => shown.get(key)));
      empty.hidden = pending.length > 0;
      clear(status);
    } catch (error) {
      if (!signal.aborted) showError(status, error);
    }
  };
  const head = ["Session", "Function", "Arguments", "Reason", "Requested", "Decision"].map((t) => h("th", { scope: "col" }, t));
  const table = h("table", { testid: "approvals" }, h("thead", {}, h("tr", {}, head)), rows);
  main.append(h("section", { class: "card" }, h("h2", {}, "Pending approvals"), table, empty, status));
  await refresh();
  const timer = setInterval(refresh, REFRESH_MS);
  signal.addEventListener("abort", () => clearInterval(timer));
}
