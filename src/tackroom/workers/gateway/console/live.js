// A session's live view: the latest run's events as they arrive (answer, tool calls, gate, cost).

import { followEvents } from "./api.js";
import { decisionButtons } from "./approvals.js";
import { blocksText, clear, h, pretty, usd } from "./dom.js";

const STATES = {
  provisioning: "starting",
  assistant_streaming: "the model is answering",
  function_execute: "running tools",
  function_awaiting_approval: "waiting for approval",
  steering_check: "checking for messages",
  stopped: "stopped",
  failed: "failed",
};

/** The live panel of session `sessionId`; `onRunEnd` is called after each `agent_end`. */
export function livePanel(sessionId, { signal, onRunEnd = () => {} }) {
  const connection = h("span", { class: "muted", testid: "stream-status" }, "connecting");
  const runLabel = h("span", { class: "muted", testid: "run-id" });
  const status = h("p", { class: "status", testid: "run-status", "aria-live": "polite" }, "no run yet");
  const usage = h("p", { class: "muted", testid: "run-usage" });
  const answer = h("div", { class: "answer", testid: "live-answer", "aria-live": "polite" });
  const tools = h("div", { class: "tools", testid: "tool-calls" });
  const log = h("ul", { class: "log", testid: "event-log" });
  const panel = h(
    "section",
    { class: "card live", testid: "live" },
    h("h3", {}, "Latest run ", runLabel, " ", connection),
    status,
    answer,
    tools,
    usage,
    h("details", {}, h("summary", {}, "Events"), log),
  );

  let runId = null;
  let spent = { input: 0, output: 0, cost: 0 };
  const blocks = new Map(); // message_id:kind -> element receiving deltas
  const cards = new Map(); // function_call_id -> card parts

  function newRun(id) {
    runId = id;
    runLabel.textContent = id;
    spent = { input: 0, output: 0, cost: 0 };
    status.textContent = "starting";
    delete status.dataset.state;
    blocks.clear();
    cards.clear();
    for (const el of [answer, tools, log, usage]) clear(el);
  }

  function deltaTarget(data) {
    const key = `${data.message_id}:${data.kind}`;
    if (!blocks.has(key)) {
      const props = data.kind === "thinking" ? { class: "thinking", testid: "thinking-text" } : { testid: "answer-text" };
      const el = h("p", props);
      blocks.set(key, el);
      answer.append(el);
    }
    return blocks.get(key);
  }

  function card(data) {
    if (!cards.has(data.function_call_id)) {
      const parts = {
        state: h("span", { class: "badge", testid: "tool-status" }, "proposed"),
        args: h("pre", { testid: "tool-args" }, pretty(data.arguments || {})),
        gate: h("p", { class: "gate", testid: "gate-decision" }),
        approval: h("div", { testid: "approval-box" }),
        result: h("pre", { testid: "tool-result", hidden: true }),
      };
      parts.el = h(
        "div",
        { class: "tool", testid: "tool-call", "data-call-id": data.function_call_id },
        h("p", {}, h("code", {}, data.function_id), " ", parts.state),
        parts.args,
        parts.gate,
        parts.approval,
        parts.result,
      );
      cards.set(data.function_call_id, parts);
      tools.append(parts.el);
    }
    return cards.get(data.function_call_id);
  }

  function showUsage(u, final) {
    const cost = u.cost_usd ?? u.cost;
    usage.textContent = `${final ? "run total" : "so far"}: ${u.input_tokens ?? u.input} in · ${u.output_tokens ?? u.output} out tokens · ${usd(cost)}`;
  }

  const handlers = {
    turn_state_changed: (d) => (status.textContent = STATES[d.to] || d.to),
    message_update: (d) => {
      if (d.kind !== "function_call") deltaTarget(d).append(document.createTextNode(d.delta));
    },
    message_complete: (d) => {
      const m = d.message;
      if (m.role !== "assistant") return;
      spent.input += m.usage.input_tokens;
      spent.output += m.usage.output_tokens;
      spent.cost += m.usage.cost_usd;
      showUsage(spent, false);
      if (m.error_message) answer.append(h("p", { class: "error" }, m.error_message));
      const key = `${d.message_id}:text`;
      const text = blocksText(m.content.filter((b) => b.type === "text"));
      if (!blocks.has(key) && text) deltaTarget({ message_id: d.message_id, kind: "text" }).append(text);
    },
    gate_decision: (d) => {
      const parts = card(d);
      parts.gate.textContent = `gate: ${d.decision} by ${d.decided_by}${d.rule_id ? ` (rule ${d.rule_id})` : ""}${d.reason ? ` — ${d.reason}` : ""}`;
      parts.gate.classList.toggle("denied", d.decision === "deny");
    },
    approval_requested: (d) => {
      const parts = card(d);
      parts.state.textContent = "needs approval";
      clear(parts.approval).append(h("p", {}, d.reason || "This call needs a person's approval."), decisionButtons(sessionId, d.function_call_id));
    },
    approval_resolved: (d) => {
      const parts = card(d);
      parts.state.textContent = d.decision === "allow" ? "approved" : d.decision;
      clear(parts.approval).append(h("p", { class: "muted" }, `${d.decision}${d.approver ? ` by ${d.approver}` : ""}${d.reason ? ` — ${d.reason}` : ""}`));
    },
    function_execution_start: (d) => {
      const parts = card(d);
      parts.state.textContent = "running";
      parts.args.textContent = pretty(d.arguments);
    },
    function_execution_end: (d) => {
      const parts = card(d);
      parts.state.textContent = d.is_error ? "error" : "done";
      parts.el.classList.toggle("failed", d.is_error);
      parts.result.hidden = false;
      const ms = d.duration_ms == null ? "" : ` (${Math.round(d.duration_ms)} ms)`;
      parts.result.textContent = blocksText(d.result.content) + ms;
    },
    budget_decision: (d) => {
      if (!d.allowed) answer.append(h("p", { class: "error", testid: "budget-denied" }, `budget: ${d.detail || d.reason}`));
    },
    agent_end: (d) => {
      status.textContent = d.state === "failed" ? `failed: ${d.error ? d.error.message : d.stop_reason}` : `finished (${d.stop_reason || "end"})`;
      status.dataset.state = d.state;
      showUsage(d.usage, true);
      onRunEnd(d);
    },
    error: (d) => answer.append(h("p", { class: "error" }, `${d.kind}: ${d.message}`)),
  };

  followEvents(sessionId, {
    signal,
    onStatus: (text) => (connection.textContent = text),
    onEvent: (type, frame, id) => {
      if (frame.run_id && frame.run_id !== runId) newRun(frame.run_id);
      log.append(h("li", {}, `#${id} ${type}`));
      const handle = handlers[type];
      if (handle) handle(frame.data || {});
    },
  });
  return panel;
}
