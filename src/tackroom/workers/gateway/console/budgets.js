// Budgets with a usage bar each: spent (and reserved) against the cap of the current period.

import { api } from "./api.js";
import { h, usd } from "./dom.js";

/** The budget and its current usage, whether the gateway nests them or spreads them. */
function parts(item) {
  const budget = item.budget || item;
  const usage = item.usage || {};
  const current = usage.current || item.current || {};
  return { budget, current };
}

function budgetRow(item) {
  const { budget, current } = parts(item);
  const cap = budget.cap_usd || 0;
  const spent = current.spent_usd || 0;
  const reserved = current.reserved_usd || 0;
  const fraction = cap > 0 ? Math.min(1, spent / cap) : 0;
  const fill = h("div", { class: fraction >= 1 ? "fill over" : fraction >= 0.8 ? "fill warn" : "fill" });
  fill.style.width = `${fraction * 100}%`;
  const flags = [budget.paused && "paused", budget.exempt && "exempt", budget.enforce === false && "not enforced"].filter(Boolean);
  return h(
    "div",
    { class: "budget", testid: "budget-row", "data-budget-id": budget.id },
    h("p", {}, h("strong", {}, budget.name || budget.id), " ", h("code", {}, budget.scope), ` · per ${budget.period}`, flags.length ? ` · ${flags.join(", ")}` : ""),
    h(
      "div",
      {
        class: "usage-bar",
        role: "progressbar",
        "aria-valuemin": 0,
        "aria-valuemax": 100,
        "aria-valuenow": Math.round(fraction * 100),
        "aria-label": `${budget.name || budget.id} usage`,
        testid: "budget-bar",
      },
      fill,
    ),
    h("p", { class: "muted", testid: "budget-figures" }, `${usd(spent)} of ${usd(cap)}${reserved ? ` (+${usd(reserved)} reserved)` : ""} · ${current.records_count || 0} calls · ${current.period_key || ""}`),
  );
}

export async function budgetsPage(main, { signal }) {
  const { budgets } = await api("/v1/budgets", { signal });
  main.append(
    h(
      "section",
      { class: "card", testid: "budgets" },
      h("h2", {}, "Budgets"),
      budgets.length ? budgets.map(budgetRow) : h("p", { class: "muted", testid: "budgets-empty" }, "No budgets. Create one with tackroom budget create."),
    ),
  );
}
