// One trace as a waterfall: a bar per span placed by start and duration; click for attributes.

import { api } from "./api.js";
import { clear, h, link, pretty } from "./dom.js";

/** Spans in tree order (children after their parent, by start), each with its depth. */
export function ordered(spans) {
  const ids = new Set(spans.map((s) => s.span_id));
  const children = new Map();
  for (const span of spans) {
    const parent = span.parent_span_id && ids.has(span.parent_span_id) ? span.parent_span_id : null;
    if (!children.has(parent)) children.set(parent, []);
    children.get(parent).push(span);
  }
  const out = [];
  const visit = (parent, depth) => {
    const kids = (children.get(parent) || []).sort((a, b) => a.start_ns - b.start_ns);
    for (const span of kids) {
      out.push({ span, depth });
      visit(span.span_id, depth + 1);
    }
  };
  visit(null, 0);
  return out;
}

function details(span) {
  const ms = (span.end_ns - span.start_ns) / 1e6;
  return [
    h("h3", {}, span.name),
    h("p", {}, `${ms.toFixed(2)} ms · ${span.status}${span.status_message ? ` — ${span.status_message}` : ""}`),
    h("pre", { testid: "span-attributes" }, pretty(span.attributes)),
    span.events && span.events.length ? h("pre", {}, pretty(span.events)) : null,
  ];
}

export async function tracePage(main, { signal }, traceId) {
  const trace = await api(`/v1/traces/${encodeURIComponent(traceId)}`, { signal });
  const spans = trace.spans || [];
  const start = Math.min(...spans.map((s) => s.start_ns));
  const total = Math.max(1, Math.max(...spans.map((s) => s.end_ns)) - start);
  const session = spans.map((s) => s.attributes["session.id"]).find(Boolean);
  const panel = h("aside", { class: "card span-details", testid: "span-details" }, h("p", { class: "muted" }, "Click a span for its attributes."));
  const rows = ordered(spans).map(({ span, depth }) => {
    const bar = h("button", {
      type: "button",
      class: span.status === "error" ? "bar error" : "bar",
      testid: "span-bar",
      "data-status": span.status,
      title: span.name,
      "aria-label": `${span.name}, ${((span.end_ns - span.start_ns) / 1e6).toFixed(2)} ms`,
      onclick: () => clear(panel).append(...details(span).filter(Boolean)),
    });
    bar.style.left = `${((span.start_ns - start) / total) * 100}%`;
    bar.style.width = `${Math.max(0.3, ((span.end_ns - span.start_ns) / total) * 100)}%`;
    const name = h("span", { class: "span-name", title: span.name }, span.name);
    name.style.paddingLeft = `${depth}em`;
    const ms = h("span", { class: "muted span-ms" }, `${((span.end_ns - span.start_ns) / 1e6).toFixed(1)} ms`);
    return h("div", { class: "span-row", testid: "span-row" }, name, h("div", { class: "lane" }, bar), ms);
  });
  main.append(
    h(
      "section",
      { class: "card" },
      h("h2", {}, "Trace ", h("code", {}, traceId)),
      h("p", { class: "muted" }, `${spans.length} spans · ${(total / 1e6).toFixed(1)} ms`, session ? [" · session ", link(session, ["sessions", session])] : null),
      h("div", { class: "waterfall", testid: "waterfall" }, rows),
    ),
    panel,
  );
}
