// One line a person reads per event of `agent::events` (the type stays in the line's tooltip).

import { blocksText, usd } from "./dom.js";

export const STATES = {
  provisioning: "starting",
  assistant_streaming: "the model is answering",
  function_execute: "running tools",
  function_awaiting_approval: "waiting for approval",
  steering_check: "checking for messages",
  stopped: "stopped",
  failed: "failed",
};
const DECISIONS = { allow: "allowed", deny: "denied", needs_approval: "needs approval", aborted: "aborted", expired: "expired" };
const MAX_VALUE = 40;

/** `120 in · 30 out tokens · $0.0040` */
export const tokens = (u) => `${u.input_tokens || 0} in · ${u.output_tokens || 0} out tokens · ${usd(u.cost_usd)}`;

const cut = (text, most) => (text.length > most ? `${text.slice(0, most - 1)}…` : text);

/** Arguments as `path=a.txt content="two words"`, each value short. */
export function argsText(args) {
  return Object.entries(args || {})
    .map(([key, value]) => {
      const text = typeof value === "string" ? (/^[^\s"=]+$/.test(value) ? value : JSON.stringify(value)) : JSON.stringify(value);
      return `${key}=${cut(text ?? "null", MAX_VALUE)}`;
    })
    .join(" ");
}

const call = (d) => `\`${d.function_id}\`${d.arguments && Object.keys(d.arguments).length ? ` ${argsText(d.arguments)}` : ""}`;
const ms = (value) => (value == null ? "" : `, ${Math.round(value)} ms`);

function answer(d) {
  const m = d.message || {};
  if (m.role === "user") return `prompt: ${cut(blocksText(m.content), 120)}`;
  if (m.role !== "assistant") return `${m.role === "custom" ? m.custom_type : m.role} stored`;
  const model = m.provider ? ` from ${m.provider}:${m.model}` : "";
  if (m.stop_reason === "error") return `model call failed${model} (${m.error_kind || "error"}): ${m.error_message || ""}`;
  const calls = (m.content || []).filter((b) => b.type === "function_call").map((b) => `${b.tool_name}(${argsText(b.arguments)})`);
  const text = blocksText((m.content || []).filter((b) => b.type === "text"));
  const said = [text ? `"${cut(text, 80)}"` : null, calls.length ? `calls ${calls.join(", ")}` : null].filter(Boolean).join(", ");
  return `answer${model} — ${tokens(m.usage || {})}${said ? `: ${said}` : ""}`;
}

const untrusted = (label) => (label && label.source === "untrusted" ? ` · untrusted, from ${(label.origins || []).join(", ") || "an unknown source"}` : "");

const FLOW_RULE = "builtin:flow:";
const BUILTIN_GATES = {
  plan: "not in the run's plan, fixed from the request before anything untrusted was read (planned mode)",
  cap: "the run has made as many calls with external effects as it may (max_external_calls)",
};

/** How the gate decided: a data-flow rule and the flow it saw, the run's plan or cap, a rule. */
function gateLine(d) {
  const head = `gate: \`${d.function_id}\` ${DECISIONS[d.decision] || d.decision}`;
  if (d.rule_id && d.rule_id.startsWith(FLOW_RULE)) {
    const flow = d.reason ? `: ${cut(d.reason, 160)}` : "";
    return `${head} by the data-flow rule ${d.rule_id.slice(FLOW_RULE.length)}${flow}`;
  }
  if (BUILTIN_GATES[d.decided_by]) return `${head}: ${BUILTIN_GATES[d.decided_by]}`;
  return `${head} by ${d.decided_by}${d.rule_id ? ` (rule ${d.rule_id})` : ""}`;
}

const LINES = {
  turn_state_changed: (d) => `turn ${d.turn_count}: ${STATES[d.to] || d.to}`,
  message_update: () => "streaming…",
  message_snapshot: () => "streaming (what came so far)",
  message_complete: answer,
  function_execution_start: (d) => `tool call ${call(d)} started`,
  function_execution_end: (d) => {
    const result = d.is_error ? `error: ${cut(blocksText(d.result && d.result.content), 80)}` : "ok";
    return `tool call \`${d.function_id}\` → ${result}${ms(d.duration_ms)}${untrusted(d.result && d.result.label)}`;
  },
  approval_requested: (d) => `approval asked for ${call(d)}${d.reason ? ` (${d.reason})` : ""}`,
  approval_resolved: (d) => `\`${d.function_id}\` ${DECISIONS[d.decision] || d.decision}${d.approver ? ` by ${d.approver}` : ""}${d.reason ? ` — ${d.reason}` : ""}`,
  gate_decision: gateLine,
  budget_decision: (d) => (d.allowed ? `budget: allowed (estimate ${usd(d.estimate_usd)})` : `budget: denied — ${d.detail || d.reason}`),
  context_assembled: (d) => `context: ${d.entries_sent} messages, ~${d.estimated_tokens} of ${d.budget_tokens} tokens${d.compacted ? " (compacted first)" : ""}`,
  model_switch: (d) => `model switch: ${d.from_provider}:${d.from_model} → ${d.to_provider}:${d.to_model} (${d.error_kind})`,
  turn_end: (d) => `turn ${d.turn_count} ended${d.function_results && d.function_results.length ? ` with ${d.function_results.length} tool result(s)` : ""}`,
  agent_end: (d) => {
    const how = d.state === "failed" ? `run failed: ${d.error ? d.error.message : d.stop_reason}` : `run finished (${d.stop_reason || "end"})`;
    return `${how} — ${tokens(d.usage || {})}`;
  },
  error: (d) => `error (${d.kind}): ${d.message}`,
  subagent_started: (d) => `subagent ${d.agent} started in ${d.child_session_id}`,
  subagent_ended: (d) => `subagent ${d.agent} ${d.state} (${d.stop_reason || "end"})`,
  handoff: (d) => `handed off to ${d.to_agent} (${d.provider}:${d.model})`,
};

/** The line of one event: what happened, in words. */
export function describe(type, data) {
  const line = LINES[type];
  if (!line) return type.replaceAll("_", " ");
  try {
    return line(data || {});
  } catch {
    return type.replaceAll("_", " "); // a shape this console does not know: its type at least
  }
}
