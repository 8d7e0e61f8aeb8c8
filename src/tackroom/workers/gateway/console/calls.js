// A session's model calls: what each was sent (system prompt, tools, messages), what it answered,
// its tokens and cost. A call recorded before the orchestrator kept what it sent is rebuilt from
// the session, and says so.

import { api } from "./api.js";
import { blocksText, h } from "./dom.js";
import { tokens } from "./events.js";
import { labelBadges, labelClasses } from "./provenance.js";

function roleOf(m) {
  if (m.role === "function_result") return `result of ${m.function_id}`;
  if (m.role === "custom") return m.custom_type;
  return m.role;
}

function sentMessage({ entry_id, message: m }) {
  const asSent = entry_id ? null : h("span", { class: "badge", testid: "call-as-sent", title: "sent in this form; the session keeps the entry it stands for" }, "as sent");
  return h(
    "div",
    { class: `sent${labelClasses(m.label)}`, testid: "call-prompt-message", "data-entry-id": entry_id },
    h("span", { class: "role" }, roleOf(m), " ", labelBadges(m.label), " ", asSent),
    h("p", {}, blocksText(m.content) || m.error_message || ""),
  );
}

const plural = (n, one, many) => `${n} ${n === 1 ? one : many}`;

/** The system prompt, collapsed: a long one would push the messages off the page. */
function systemView(call, c) {
  const size = c ? ` — ~${c.system_tokens} tokens` : ` — ${call.system_prompt.length} chars`;
  return h(
    "details",
    { class: "system", testid: "call-system" },
    h("summary", {}, `System prompt${size}`),
    h("pre", { testid: "call-system-prompt" }, call.system_prompt || "(empty)"),
  );
}

function toolsView(call, c) {
  const size = c ? ` — ~${c.tools_tokens} tokens` : "";
  const how = call.tool_calling === "text" ? " (written in the system prompt)" : "";
  const tools = call.tools || [];
  return h(
    "div",
    { testid: "call-tools" },
    h("h4", {}, `Tools offered — ${tools.length}${how}${size}`),
    tools.length
      ? h("ul", { class: "tools" }, tools.map((t) => h("li", { testid: "call-tool", title: JSON.stringify(t.parameters) }, h("code", {}, t.name), t.description ? ` — ${t.description}` : "")))
      : h("p", { class: "muted" }, "none"),
  );
}

function contextLine(c) {
  if (!c) return null;
  const parts = `system ~${c.system_tokens} · tools ~${c.tools_tokens} · history ~${c.history_tokens}`;
  return h("p", { class: "muted", testid: "call-context" }, `context: ${c.entries_sent} messages sent, ~${c.estimated_tokens} of ${c.budget_tokens} tokens (${parts})`);
}

/** One model call: what it was sent, what it answered, its tokens and cost. */
function callView(call, number) {
  const m = call.completion;
  const c = call.context;
  const head = `#${number} ${call.provider}:${call.model} — ${tokens(call.usage)} · ${m.stop_reason}`;
  const exact = call.exact
    ? h("span", { class: "badge exact", testid: "call-exact", title: "recorded when the call was made" }, "exact")
    : h("span", { class: "badge", testid: "call-exact", title: "recorded before calls kept what they sent: rebuilt from the session, without system prompt and tools" }, "rebuilt");
  return h(
    "details",
    { class: "call", testid: "model-call", "data-entry-id": call.entry_id, "data-exact": String(Boolean(call.exact)) },
    h("summary", { class: "figures" }, h("span", { testid: "call-figures" }, head), " ", exact),
    contextLine(c),
    call.exact ? systemView(call, c) : null,
    call.exact ? toolsView(call, c) : null,
    h("h4", {}, `Messages — ${plural(call.prompt.length, "message", "messages")}`),
    h("div", { testid: "call-prompt" }, call.prompt.map(sentMessage)),
    h("h4", {}, `Completion — ${call.usage.output_tokens || 0} tokens`),
    h("pre", { testid: "call-completion" }, blocksText(m.content) || m.error_message || ""),
  );
}

/** Fill `el` with the session's model calls; the same calls as shown stay as they are (open). */
export async function showModelCalls(el, path, signal) {
  let calls;
  try {
    ({ calls } = await api(`${path}/model-calls`, { signal }));
  } catch (error) {
    el.replaceChildren(h("p", { class: "muted" }, `Model calls unavailable: ${error.message}`));
    delete el.dataset.shown;
    return;
  }
  const shown = calls.map((call) => call.entry_id).join(" ");
  if (el.dataset.shown === shown) return;
  el.dataset.shown = shown;
  el.replaceChildren(...(calls.length ? calls.map((call, i) => callView(call, i + 1)) : [h("p", { class: "muted" }, "No model calls yet.")]));
}
