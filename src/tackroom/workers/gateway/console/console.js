// The console's entry: signing in (an OIDC sign-in when the gateway offers one, a pasted API key
// or token always), who is signed in, the hash router, one page at a time.

import { adoptTokenFromUrl, api, forgetToken, getToken, setToken, whenUnauthorized } from "./api.js";
import { approvalsPage } from "./approvals.js";
import { budgetsPage } from "./budgets.js";
import { runsPage } from "./runs.js";
import { clear, h, showError } from "./dom.js";
import { sessionPage } from "./session.js";
import { sessionsPage } from "./sessions.js";
import { authConfig, beginSignIn, finishSignIn, isSignInAnswer, signInBlocker } from "./signin.js";
import { tracePage } from "./traces.js";
import { treePage } from "./tree.js";

const ROUTES = [
  [/^#\/sessions\/?$/, sessionsPage],
  [/^#\/sessions\/([^/]+)\/tree$/, treePage],
  [/^#\/sessions\/([^/]+)$/, sessionPage],
  [/^#\/runs$/, runsPage],
  [/^#\/approvals$/, approvalsPage],
  [/^#\/budgets$/, budgetsPage],
  [/^#\/traces\/([^/]+)$/, tracePage],
];

const METHODS = { api_key: "API key", oidc: "OIDC", token: "gateway token", hook: "custom sign-in", local: "local" };

const main = document.getElementById("main");
const who = document.getElementById("whoami");
const signOut = document.getElementById("sign-out");
let current = null; // the AbortController of the page on screen: its streams and timers stop with it
let shownFor = null; // the token whose principal the header shows

/** A new page on screen: the previous one's streams and timers stop. */
function newPage() {
  if (current) current.abort();
  current = new AbortController();
  return current.signal;
}

function route() {
  newPage();
  if (!getToken()) return askForToken();
  showWho();
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

/** The header's "signed in as": `GET /v1/me` once per token (a 401 asks for another). */
async function showWho() {
  const token = getToken();
  signOut.hidden = false;
  if (shownFor === token) return;
  shownFor = token;
  who.hidden = true;
  try {
    const me = await api("/v1/me");
    if (getToken() !== token) return;
    who.replaceChildren(
      h("span", { testid: "whoami-name" }, `${me.tenant}/${me.user}`),
      h("span", { class: "via", testid: "whoami-method" }, ` · ${METHODS[me.method] || me.method}`),
    );
    who.title = me.roles.length ? `roles: ${me.roles.join(", ")}` : "no roles";
    who.hidden = false;
  } catch {
    if (shownFor === token) shownFor = null; // try again on the next page
  }
}

function forgetSignIn() {
  forgetToken();
  shownFor = null;
  who.hidden = true;
  who.replaceChildren();
  signOut.hidden = true;
}

/** The sign-in card: "Sign in" with the identity provider when the gateway names an OIDC client
 * for the console, and a field for an API key (or the gateway's token, or an access token). */
async function askForToken(reason) {
  const signal = current.signal;
  forgetSignIn();
  const config = await authConfig();
  if (signal.aborted) return;
  const methods = (config && config.methods) || ["api_key", "token"];
  const oidc = config && config.oidc && config.oidc.client_id ? config.oidc : null;
  const alert = h("p", { class: "error", role: "alert", testid: "sign-in-error", hidden: !reason }, reason || "");
  const input = h("input", { id: "token", type: "password", autocomplete: "off", required: true, testid: "token-input" });
  const pasted = [methods.includes("api_key") ? "API key" : null, methods.includes("token") ? "gateway token" : null];
  const what = pasted.filter(Boolean).join(" or ") || "access token";
  const label = oidc ? `Or paste ${/^[aeiou]/i.test(what) ? "an" : "a"} ${what}` : what[0].toUpperCase() + what.slice(1);
  const form = h(
    "form",
    { class: "card token", testid: "token-form" },
    h("h2", {}, "Sign in"),
    alert,
    oidc ? oidcSignIn(oidc, alert) : null,
    h("label", { for: "token" }, label),
    input,
    h("button", { type: "submit", testid: "token-submit" }, "Open the console"),
    h("p", { class: "muted" }, "Kept in this tab only (sessionStorage). tackroom keys create makes an API key."),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    setToken(input.value.trim());
    route();
  });
  clear(main).append(form);
  (form.querySelector("[data-testid=oidc-sign-in]:enabled") || input).focus();
}

function oidcSignIn(oidc, alert) {
  const blocker = signInBlocker(oidc);
  let host = oidc.issuer;
  try {
    host = new URL(oidc.issuer).host;
  } catch {
    // shown as configured
  }
  const button = h("button", { type: "button", testid: "oidc-sign-in", disabled: Boolean(blocker) }, `Sign in with ${host}`);
  button.addEventListener("click", async () => {
    button.disabled = true;
    alert.hidden = true;
    try {
      await beginSignIn(oidc); // the page goes to the identity provider
    } catch (error) {
      alert.textContent = `Sign-in failed: ${error.message}`;
      alert.hidden = false;
      button.disabled = false;
    }
  });
  return h("div", { class: "oidc", testid: "oidc" }, button, blocker ? h("p", { class: "muted", testid: "oidc-blocked" }, blocker) : null);
}

whenUnauthorized((error) => {
  newPage();
  askForToken(`The gateway refused that token: ${error.message}`);
});

signOut.addEventListener("click", () => {
  forgetSignIn();
  route();
});

async function start() {
  adoptTokenFromUrl();
  window.addEventListener("hashchange", route);
  if (isSignInAnswer()) {
    clear(main).append(h("p", { class: "muted", testid: "signing-in" }, "Signing in…"));
    try {
      await finishSignIn();
    } catch (error) {
      newPage();
      return askForToken(`Sign-in failed: ${error.message}`);
    }
  }
  route();
}

start();
