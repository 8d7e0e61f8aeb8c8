// Signing in: what the gateway accepts (GET /v1/auth/config), and OIDC authorization code with
// PKCE (S256) done in this page — discovery, the trip to the identity provider's sign-in page and
// back to this page's own URL, the code exchange at the token endpoint. The access token it ends
// with is kept and sent exactly as a pasted API key is; the code and state leave the address bar
// (and the history entry) before the exchange starts.

import { setToken } from "./api.js";

const PENDING_KEY = "tackroom.oidc.pending";
const PENDING_MAX_AGE_MS = 10 * 60 * 1000;

export class SignInError extends Error {}

let config = null;

/** `GET /v1/auth/config` ({methods, oidc}), asked once; null when the gateway cannot say. */
export async function authConfig() {
  if (config) return config;
  try {
    const response = await fetch("/v1/auth/config", { headers: { Accept: "application/json" } });
    if (response.ok) config = await response.json();
  } catch {
    // unreachable or an older gateway: the page offers key paste only
  }
  return config;
}

/** Why this page cannot sign in with `oidc` (null: it can). */
export function signInBlocker(oidc) {
  if (!oidc || !oidc.client_id) return "the gateway names no OIDC client for the console";
  if (!window.isSecureContext || !crypto.subtle) {
    return "signing in needs HTTPS (or localhost): this browser keeps WebCrypto off on plain HTTP";
  }
  return null;
}

/** The URL the identity provider sends the browser back to: this page, without query or hash. */
export const redirectUri = () => `${location.origin}${location.pathname}`;

function base64url(bytes) {
  let text = "";
  for (const byte of new Uint8Array(bytes)) text += String.fromCharCode(byte);
  return btoa(text).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

const randomText = (bytes) => base64url(crypto.getRandomValues(new Uint8Array(bytes)));

async function discover(issuer) {
  const url = `${issuer.replace(/\/+$/, "")}/.well-known/openid-configuration`;
  let response;
  try {
    response = await fetch(url, { headers: { Accept: "application/json" }, credentials: "omit" });
  } catch (error) {
    throw new SignInError(`the identity provider cannot be reached at ${url} (${error.message})`);
  }
  if (!response.ok) throw new SignInError(`${url} answered HTTP ${response.status}`);
  const found = await response.json().catch(() => ({}));
  if (found.issuer !== issuer) {
    throw new SignInError(`${url} names issuer ${JSON.stringify(found.issuer)}, not ${issuer}`);
  }
  if (typeof found.authorization_endpoint !== "string" || typeof found.token_endpoint !== "string") {
    throw new SignInError(`${url} names no authorization or token endpoint`);
  }
  return found;
}

/** Leave for the identity provider's sign-in page; it sends the browser back here with
 * `?code=…&state=…`, which {@link finishSignIn} completes. */
export async function beginSignIn(oidc) {
  const blocker = signInBlocker(oidc);
  if (blocker) throw new SignInError(blocker);
  const provider = await discover(oidc.issuer);
  const verifier = randomText(32); // 43 characters of [A-Za-z0-9_-] (RFC 7636)
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier));
  const state = randomText(16);
  const returnTo = /^#\/[^#]*$/.test(location.hash) ? location.hash : "#/sessions";
  const pending = {
    state,
    verifier,
    issuer: oidc.issuer,
    client_id: oidc.client_id,
    audience: oidc.audience,
    token_endpoint: provider.token_endpoint,
    redirect_uri: redirectUri(),
    return_to: returnTo,
    at: Date.now(),
  };
  sessionStorage.setItem(PENDING_KEY, JSON.stringify(pending));
  const url = new URL(provider.authorization_endpoint);
  const params = {
    response_type: "code",
    client_id: oidc.client_id,
    redirect_uri: pending.redirect_uri,
    scope: oidc.scopes.join(" "),
    state,
    code_challenge: base64url(digest),
    code_challenge_method: "S256",
    resource: oidc.audience, // RFC 8707: an access token for this gateway (its `aud`)
  };
  for (const [key, value] of Object.entries(params)) url.searchParams.set(key, value);
  location.assign(url.href);
}

/** Whether the address holds the identity provider's answer (a code or an error, with state). */
export function isSignInAnswer() {
  const query = new URLSearchParams(location.search);
  return query.has("state") && (query.has("code") || query.has("error"));
}

function takePending() {
  const text = sessionStorage.getItem(PENDING_KEY);
  sessionStorage.removeItem(PENDING_KEY); // one answer per sign-in: a replay finds nothing
  try {
    return text ? JSON.parse(text) : null;
  } catch {
    return null;
  }
}

/** Complete the sign-in the address answers: check it is this tab's, exchange the code for an
 * access token, keep the token. The address bar is cleaned first, whatever happens. */
export async function finishSignIn() {
  const query = new URLSearchParams(location.search);
  const pending = takePending();
  history.replaceState(null, "", `${location.pathname}${pending ? pending.return_to : "#/sessions"}`);
  if (!pending || query.get("state") !== pending.state) {
    throw new SignInError("that sign-in was not started from this tab: sign in again");
  }
  if (Date.now() - pending.at > PENDING_MAX_AGE_MS) {
    throw new SignInError("that sign-in took too long: sign in again");
  }
  const iss = query.get("iss"); // RFC 9207: which provider answered
  if (iss !== null && iss !== pending.issuer) {
    throw new SignInError(`the answer came from ${iss}, not ${pending.issuer}: sign in again`);
  }
  if (query.has("error")) {
    throw new SignInError(`the identity provider said: ${query.get("error_description") || query.get("error")}`);
  }
  const body = new URLSearchParams({
    grant_type: "authorization_code",
    code: query.get("code"),
    redirect_uri: pending.redirect_uri,
    client_id: pending.client_id,
    code_verifier: pending.verifier,
    resource: pending.audience,
  });
  let response;
  try {
    response = await fetch(pending.token_endpoint, {
      method: "POST",
      headers: { "Content-Type": "application/x-www-form-urlencoded", Accept: "application/json" },
      body,
      credentials: "omit",
    });
  } catch (error) {
    throw new SignInError(
      `the token endpoint cannot be reached (${error.message}): it must allow CORS from ${location.origin}`,
    );
  }
  const answer = await response.json().catch(() => ({}));
  if (!response.ok || typeof answer.access_token !== "string") {
    const why = answer.error_description || answer.error || `HTTP ${response.status}`;
    throw new SignInError(`the identity provider did not give a token: ${why}`);
  }
  setToken(answer.access_token);
}
