// Budgets, each with a bar: spent against the cap of its current period.

import { api } from "./api.js";
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

export async function budgetsPage(main, { signal }) {
  const { budgets } = await api("/v1/budgets", { signal });
  const none = h("p", { class: "muted", testid: "budgets-empty" }, "No budgets yet (tackroom budget create).");
  main.append(h("section", { class: "card", testid: "budgets" }, h("h2", {}, "Budgets"), budgets.length ? budgets.map(budgetRow) : none));
}
