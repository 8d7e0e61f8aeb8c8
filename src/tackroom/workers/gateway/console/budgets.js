// Budgets, each with a bar: spent against the cap of its current period.

import { ApiError, api } from "./api.js";
import { h, usd } from "./dom.js";

function budgetRow({ budget: b, usage }) {
  const current = (usage && usage.current) || { spent_usd: 0, reserved_usd: 0, records_count: 0, period_key: "" };
  const fraction = b.cap_usd > 0 ? Math.min(1, current.spent_usd / b.cap_usd) : 0;
  const percent = Math.round(fraction * 100);
  const fill = h("div", { class: fraction >= 1 ? "fill over" : fraction >= 0.8 ? "fill warn" : "fill" });
  fill.style.width = `${fraction * 100}%`;
  const bar = h("div", { class: "usage-bar", role: "progressbar", "aria-valuemin": 0, "aria-valuemax": 100, "aria-valuenow": percent, "aria-label": `${b.name || b.id} spent`, testid: "budget-bar" }, fill);
  const flags = [b.paused && "paused", b.exempt && "exempt", !b.enforce && "not enforced"].filter(Boolean).map((f) => ` · ${f}`);
  const reserved = current.reserved_usd ? ` (+${usd(current.reserved_usd)} reserved)` : "";
  const figures = `${usd(current.spent_usd)} of ${usd(b.cap_usd)}${reserved} · ${percent}% · ${current.records_count} calls · ${current.period_key}`;
  return h(
    "div",
    { class: "budget", testid: "budget-row", "data-budget-id": b.id },
    h("p", {}, h("strong", {}, b.name || b.id), " ", h("code", {}, b.scope), ` · per ${b.period}`, flags),
    bar,
    h("p", { class: "muted", testid: "budget-figures" }, usage ? figures : "usage unavailable"),
  );
}

const HOW_TO = `agent:
  workers: [engine, sessions, catalog, credentials, directory, orchestrator, compactor,
            files, utilities, sandbox, shell, http, policy, approvals, tasks, audit,
            budget]                         # the default list, and budget
worker_config:
  orchestrator:
    budget_check_function: budget::check    # reserve each model call's estimate first
    budget_record_function: budget::record  # then charge what it cost
    budget_workspace: main                  # charge calls to workspace/main too`;

/** No budget worker on the bus: what to put in tackroom.yaml, instead of an error. */
function howToEnable() {
  return h(
    "section",
    { class: "card", testid: "budgets-off" },
    h("h2", {}, "Budgets are off"),
    h("p", {}, "No budget worker is running, so model calls are not checked against a spending cap. To turn budgets on, add the budget worker and wire it into the orchestrator in ", h("code", {}, "tackroom.yaml"), ":"),
    h("pre", { testid: "budgets-config" }, HOW_TO),
    h("p", {}, "Restart ", h("code", {}, "tackroom serve"), ", then create a budget, e.g. ", h("code", {}, "tackroom budget create workspace/main --cap 5 --period day"), ". Each budget then shows here with a bar of what it spent."),
  );
}

const budgetWorkerMissing = (error) =>
  error instanceof ApiError && error.code === "unavailable" && String((error.details || {}).function_id || "").startsWith("budget::");

export async function budgetsPage(main, { signal }) {
  let budgets;
  try {
    ({ budgets } = await api("/v1/budgets", { signal }));
  } catch (error) {
    if (!budgetWorkerMissing(error)) throw error;
    main.append(howToEnable());
    return;
  }
  const none = h("p", { class: "muted", testid: "budgets-empty" }, "No budgets yet (tackroom budget create).");
  main.append(h("section", { class: "card", testid: "budgets" }, h("h2", {}, "Budgets"), budgets.length ? budgets.map(budgetRow) : none));
}
