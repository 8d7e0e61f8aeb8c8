// A session's live view: the latest run's events as they arrive (answer, tool calls, gate, cost).

import { followEvents } from "./api.js";
import { decisionButtons } from "./approvals.js";
import { blocksText, clear, h, pretty } from "./dom.js";
import { STATES, describe, tokens } from "./events.js";
import { labelBadges, labelClasses } from "./provenance.js";

const DECIDED = { allow: "approved", deny: "denied" };

const usageLine = (u, label) => `${label}: ${tokens(u)}`;

/** A tool call's card: its function, arguments, the gate's decision, approval, result. */
function toolCard(data) {
  const card = {
    state: h("span", { class: "badge", testid: "tool-status" }, "proposed"),
    args: h("pre", { testid: "tool-args" }),
    gate: h("p", { class: "gate", testid: "gate-decision" }),
    approval: h("div", { testid: "approval-box" }),
    result: h("pre", { testid: "tool-result", hidden: true }),
  };
  card.title = h("p", {}, h("code", {}, data.function_id), " ", card.state);
  card.el = h("div", { class: "tool", testid: "tool-call", "data-call-id": data.function_call_id }, card.title, card.args, card.gate, card.approval, card.result);
  return card;
}

/** The live panel of session `sessionId`; `onRunEnd` is called after each `agent_end`. */
export function livePanel(sessionId, { signal, onRunEnd = () => {} }) {
  const connection = h("span", { class: "badge", testid: "stream-status" }, "connecting");
  const runLabel = h("span", { class: "muted", testid: "run-id" });
  const status = h("p", { class: "status", testid: "run-status", "aria-live": "polite" }, "no run yet");
  const usage = h("p", { class: "muted", testid: "run-usage" });
  const answer = h("div", { class: "answer", testid: "live-answer", "aria-live": "polite" });
  const tools = h("div", { class: "tools", testid: "tool-calls" });
  const log = h("ol", { class: "log", testid: "event-log" });
  const logCount = h("span", { testid: "event-count" }, "0");
  const events = h("details", { testid: "events" }, h("summary", {}, "Events of this session (", logCount, ")"), log);
  const heading = h("h3", {}, "Latest run ", runLabel, " ", connection);
  const panel = h("section", { class: "card live", testid: "live" }, heading, status, answer, tools, usage, events);
  let stored = 0;

  /** A stored event's line (live deltas are not stored: the answer above shows them). */
  function logged(type, data, id) {
    stored += 1;
    logCount.textContent = String(stored);
    const number = h("span", { class: "seq" }, `#${id}`);
    log.append(h("li", { testid: "event-line", "data-type": type, title: type }, number, " ", describe(type, data)));
  }

  let runId = null;
  let spent = null; // the run's usage so far, from its finished assistant messages
  const blocks = new Map(); // `${message_id}:${kind}` -> the element its deltas go to
  const cards = new Map(); // function_call_id -> its card

  function newRun(id) {
    runId = id;
    runLabel.textContent = id;
    spent = { input_tokens: 0, output_tokens: 0, cost_usd: 0 };
    status.textContent = "starting";
    delete status.dataset.state;
    blocks.clear();
    cards.clear();
    for (const el of [answer, tools, usage]) clear(el);
    log.append(h("li", { class: "run-mark", testid: "event-run" }, `run ${id}`));
  }

  function block(messageId, kind) {
    const key = `${messageId}:${kind}`;
    if (!blocks.has(key)) {
      blocks.set(key, h("p", kind === "thinking" ? { class: "thinking", testid: "thinking-text" } : { testid: "answer-text" }));
      answer.append(blocks.get(key));
    }
    return blocks.get(key);
  }

  function card(data) {
    if (!cards.has(data.function_call_id)) {
      cards.set(data.function_call_id, toolCard(data));
      tools.append(cards.get(data.function_call_id).el);
    }
    const found = cards.get(data.function_call_id);
    if (data.arguments) found.args.textContent = pretty(data.arguments);
    return found;
  }

  const handlers = {
    turn_state_changed: (d) => (status.textContent = STATES[d.to] || d.to),
    message_update: (d) => {
      // live only (never stored): one text node per delta, the answer grows as tokens arrive
      if (d.kind !== "function_call") block(d.message_id, d.kind).append(document.createTextNode(d.delta));
    },
    message_snapshot: (d) => {
      // connected mid-answer: what streamed so far, then the deltas after it
      for (const kind of ["thinking", "text"]) {
        const text = d.parts.filter((p) => p.kind === kind).map((p) => p.text).join("");
        if (text) block(d.message_id, kind).replaceChildren(document.createTextNode(text));
      }
    },
    message_complete: ({ message_id, message: m }) => {
      if (m.role !== "assistant") return;
      for (const key of Object.keys(spent)) spent[key] += m.usage[key] || 0;
      usage.textContent = usageLine(spent, "so far");
      const text = blocksText(m.content.filter((b) => b.type === "text"));
      // the stored message is the answer: shown whole when its deltas were missed (not streamed
      // while this page watched, held back for a redactor, or a connection dropped mid-answer)
      const shown = blocks.get(`${message_id}:text`);
      if (text && !shown) block(message_id, "text").append(text);
      else if (text && shown.textContent !== text) shown.replaceChildren(document.createTextNode(text));
      if (m.error_message) answer.append(h("p", { class: "error" }, m.error_message));
    },
    gate_decision: (d) => {
      const rule = d.rule_id ? ` (rule ${d.rule_id})` : "";
      const { gate, state } = card(d);
      gate.textContent = `gate: ${d.decision} by ${d.decided_by}${rule}${d.reason ? ` — ${d.reason}` : ""}`;
      gate.classList.toggle("denied", d.decision === "deny");
      if (d.decision === "deny") state.textContent = "refused";
    },
    approval_requested: (d) => {
      const c = card(d);
      c.state.textContent = "needs approval";
      c.approval.replaceChildren(decisionButtons(sessionId, d.function_call_id));
    },
    approval_resolved: (d) => {
      const c = card(d);
      c.state.textContent = DECIDED[d.decision] || d.decision;
      const who = `${d.decision}${d.approver ? ` by ${d.approver}` : ""}${d.reason ? ` — ${d.reason}` : ""}`;
      c.approval.replaceChildren(h("p", { class: "muted" }, who));
    },
    function_execution_start: (d) => (card(d).state.textContent = "running"),
    function_execution_end: (d) => {
      const c = card(d);
      c.state.textContent = d.is_error ? "error" : "done";
      c.el.classList.toggle("failed", d.is_error);
      c.result.hidden = false;
      c.result.textContent = blocksText(d.result.content) + (d.duration_ms == null ? "" : ` (${Math.round(d.duration_ms)} ms)`);
      if (d.result.label) {
        c.el.className += labelClasses(d.result.label);
        c.title.append(" ", labelBadges(d.result.label));
      }
    },
    budget_decision: (d) => {
      if (!d.allowed) answer.append(h("p", { class: "error", testid: "budget-denied" }, `budget: ${d.detail || d.reason}`));
    },
    agent_end: (d) => {
      const failed = d.state === "failed";
      status.textContent = failed ? `failed: ${d.error ? d.error.message : d.stop_reason}` : `finished (${d.stop_reason || "end"})`;
      status.dataset.state = d.state;
      usage.textContent = usageLine(d.usage, "run total");
      onRunEnd(d);
    },
    error: (d) => answer.append(h("p", { class: "error" }, `${d.kind}: ${d.message}`)),
  };

  followEvents(sessionId, {
    signal,
    onStatus: (text) => (connection.textContent = text),
    onEvent: (type, frame, id) => {
      if (frame.run_id && frame.run_id !== runId) newRun(frame.run_id);
      if (id !== null) logged(type, frame.data, id);
      if (handlers[type]) handlers[type](frame.data || {});
    },
  });
  return panel;
}
