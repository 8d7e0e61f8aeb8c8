// Runs across sessions, newest first, with filters: status, model, tool, cost, time, principal.

import { api } from "./api.js";
import { clear, h, link, showError, usd, when } from "./dom.js";

const STATUSES = ["", "running", "waiting", "stopped", "failed"];

function field(name, label, props = {}) {
  const input = h("input", { id: `runs-${name}`, name, testid: `filter-${name}`, ...props });
  return [h("label", { for: `runs-${name}` }, label), input];
}

/** A `datetime-local` value as seconds since the epoch (the page's time zone), or "". */
const seconds = (value) => (value ? String(new Date(value).getTime() / 1000) : "");

function runRow(run) {
  const duration = run.ended_at ? `${(run.ended_at - run.started_at).toFixed(1)} s` : "";
  const u = run.usage;
  return h(
    "tr",
    { testid: "run-row", "data-run-id": run.run_id, "data-status": run.status },
    h("td", {}, link(run.session_id, ["sessions", run.session_id], { testid: "run-session-link" }), h("br"), h("span", { class: "muted" }, run.run_id)),
    h("td", {}, h("span", { class: "status", "data-state": run.status }, run.status), run.stop_reason ? h("span", { class: "muted" }, ` (${run.stop_reason})`) : null),
    h("td", { testid: "run-models" }, run.models.join(", ")),
    h("td", { testid: "run-tools" }, run.tools.map((t) => h("code", {}, t)).flatMap((c, i) => (i ? [", ", c] : [c]))),
    h("td", {}, `${u.input_tokens} in · ${u.output_tokens} out`, h("br"), h("span", { testid: "run-cost" }, usd(u.cost_usd))),
    h("td", {}, run.principal || ""),
    h("td", {}, when(run.started_at), h("br"), h("span", { class: "muted" }, duration)),
  );
}

export async function runsPage(main, { signal }) {
  const status = h("select", { id: "runs-status", name: "status", testid: "filter-status" }, STATUSES.map((s) => h("option", { value: s }, s || "any")));
  const fields = [
    [h("label", { for: "runs-status" }, "Status"), status],
    field("model", "Model", { placeholder: "openai:gpt" }),
    field("tool", "Tool", { placeholder: "fs::*" }),
    field("principal", "Principal", { placeholder: "user id" }),
    field("min_cost", "Cost at least ($)", { type: "number", min: 0, step: "0.0001" }),
    field("since", "Since", { type: "datetime-local" }),
    field("until", "Until", { type: "datetime-local" }),
  ];
  const form = h("form", { class: "filters", testid: "runs-filters" }, fields.map((pair) => h("div", {}, pair)), h("button", { type: "submit", testid: "runs-apply" }, "Filter"));
  const rows = h("tbody", { testid: "run-rows" });
  const note = h("p", { class: "muted", testid: "runs-note", "aria-live": "polite" });
  const problem = h("div");

  const load = async () => {
    const values = Object.fromEntries(new FormData(form).entries());
    values.since = seconds(values.since);
    values.until = seconds(values.until);
    try {
      const found = await api("/v1/runs", { signal, query: values });
      rows.replaceChildren(...found.runs.map(runRow));
      const more = found.truncated ? " (more match: narrow the filters)" : "";
      note.textContent = `${found.runs.length} ${found.runs.length === 1 ? "run" : "runs"} from ${found.sessions_scanned} sessions${more}`;
      clear(problem);
    } catch (error) {
      if (!signal.aborted) showError(problem, error);
    }
  };
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    load();
  });
  const head = ["Session / run", "Status", "Model", "Tools", "Tokens / cost", "Principal", "Started"].map((c) => h("th", { scope: "col" }, c));
  main.append(h("section", { class: "card" }, h("h2", {}, "Runs"), form, note, h("table", { testid: "runs" }, h("thead", {}, h("tr", {}, head)), rows), problem));
  await load();
}
