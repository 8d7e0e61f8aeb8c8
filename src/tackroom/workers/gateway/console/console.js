// The console's entry: the token prompt, the hash router, one page at a time.

import { adoptTokenFromUrl, forgetToken, getToken, setToken, whenUnauthorized } from "./api.js";
import { approvalsPage } from "./approvals.js";
import { budgetsPage } from "./budgets.js";
import { clear, h, showError } from "./dom.js";
import { sessionPage } from "./session.js";
import { sessionsPage } from "./sessions.js";
import { tracePage } from "./traces.js";
import { treePage } from "./tree.js";

const ROUTES = [
  [/^#\/sessions\/?$/, sessionsPage],
  [/^#\/sessions\/([^/]+)\/tree$/, treePage],
  [/^#\/sessions\/([^/]+)$/, sessionPage],
  [/^#\/approvals$/, approvalsPage],
  [/^#\/budgets$/, budgetsPage],
  [/^#\/traces\/([^/]+)$/, tracePage],
];

const main = document.getElementById("main");
let current = null; // the AbortController of the page on screen: its streams and timers stop with it

function route() {
  if (current) current.abort();
  current = new AbortController();
  if (!getToken()) return askForToken();
  const hash = location.hash || "#/sessions";
  for (const [pattern, page] of ROUTES) {
    const match = pattern.exec(hash);
    if (match) {
      const args = match.slice(1).map(decoded);
      markNav(hash);
      clear(main);
      const { signal } = current;
      page(main, { signal }, ...args).catch((error) => {
        if (!signal.aborted && error.status !== 401) showError(main, error);
      });
      return;
    }
  }
  location.hash = "#/sessions";
}

function decoded(segment) {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment; // a malformed %-escape: the id as typed
  }
}

function markNav(hash) {
  for (const a of document.querySelectorAll("nav a")) {
    a.toggleAttribute("aria-current", hash.startsWith(a.getAttribute("href")));
  }
}

function askForToken(reason) {
  const input = h("input", { id: "token", type: "password", autocomplete: "off", required: true, testid: "token-input" });
  const form = h(
    "form",
    { class: "card token", testid: "token-form" },
    h("h2", {}, "Sign in"),
    reason ? h("p", { class: "error", role: "alert" }, reason) : null,
    h("label", { for: "token" }, "Gateway token"),
    input,
    h("button", { type: "submit", testid: "token-submit" }, "Open the console"),
    h("p", { class: "muted" }, "Kept in this tab only (sessionStorage). tackroom serve prints a link with it."),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    setToken(input.value.trim());
    route();
  });
  clear(main).append(form);
  input.focus();
}

whenUnauthorized(() => {
  forgetToken();
  if (current) current.abort();
  askForToken("The gateway refused that token.");
});

document.getElementById("sign-out").addEventListener("click", () => {
  forgetToken();
  route();
});

adoptTokenFromUrl();
window.addEventListener("hashchange", route);
route();
