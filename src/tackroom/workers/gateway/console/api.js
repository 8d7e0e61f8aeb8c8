// The public HTTP API (v1) with the bearer token, and the SSE event stream read with fetch().

const TOKEN_KEY = "tackroom.token";
const RECONNECT_MS = 1000;

export class ApiError extends Error {
  constructor(status, code, message, details = {}) {
    super(message);
    Object.assign(this, { status, code, details });
  }
}

/** Move a `#token=...` fragment into sessionStorage and out of the address bar (and history). */
export function adoptTokenFromUrl() {
  if (!location.hash.startsWith("#token=")) return;
  setToken(decodeURIComponent(location.hash.slice("#token=".length)));
  history.replaceState(null, "", `${location.pathname}${location.search}#/sessions`);
}

export const getToken = () => sessionStorage.getItem(TOKEN_KEY);
export const setToken = (token) => sessionStorage.setItem(TOKEN_KEY, token);
export const forgetToken = () => sessionStorage.removeItem(TOKEN_KEY);

/** Called with the error when the gateway refuses the token (the app asks for another). */
let onUnauthorized = () => {};
export const whenUnauthorized = (handler) => (onUnauthorized = handler);

const headers = (extra = {}) => ({ Authorization: `Bearer ${getToken() || ""}`, ...extra });

async function failure(response) {
  const body = await response.json().catch(() => null); // not JSON: the status says enough
  const error = (body && body.error) || {};
  const failed = new ApiError(response.status, error.code || `http_${response.status}`, error.message || response.statusText, error.details || {});
  if (response.status === 401) onUnauthorized(failed);
  return failed;
}

/** Call a JSON route; resolves to the parsed body (null for 204). */
export async function api(path, { method = "GET", body, query, signal } = {}) {
  const url = new URL(path, location.origin);
  for (const [key, value] of Object.entries(query || {})) {
    if (value !== undefined && value !== null && value !== "") url.searchParams.set(key, value);
  }
  const init = { method, signal, headers: headers(body === undefined ? {} : { "Content-Type": "application/json" }) };
  if (body !== undefined) init.body = JSON.stringify(body);
  const response = await fetch(url, init);
  if (!response.ok) throw await failure(response);
  return response.status === 204 ? null : response.json();
}

/** A `text/event-stream` reader: push decoded text, get each complete event dispatched. */
export class EventParser {
  constructor(dispatch) {
    this.dispatch = dispatch;
    this.tail = "";
    this.reset();
  }

  reset() {
    this.event = { id: null, type: "message", data: [] };
  }

  push(text) {
    const lines = (this.tail + text).split(/\r\n|\r|\n/);
    this.tail = lines.pop();
    for (const line of lines) this.line(line);
  }

  line(line) {
    const event = this.event;
    if (line === "") {
      if (event.data.length) this.dispatch({ id: event.id, type: event.type, data: event.data.join("\n") });
      this.reset();
    } else if (!line.startsWith(":")) {
      // ":" starts a comment (the heartbeat)
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
      if (field === "id") event.id = value;
      else if (field === "event") event.type = value;
      else if (field === "data") event.data.push(value);
    }
  }
}

/**
 * Follow a session's events until `signal` aborts: `onEvent(type, data, id)` for each, resuming
 * after the last id seen (Last-Event-ID) whenever the connection drops.
 */
export async function followEvents(sessionId, { signal, onEvent, onStatus = () => {} }) {
  let lastId = null;
  const url = `/v1/sessions/${encodeURIComponent(sessionId)}/events`;
  while (!signal.aborted) {
    try {
      const extra = { Accept: "text/event-stream" };
      if (lastId !== null) extra["Last-Event-ID"] = lastId;
      const response = await fetch(url, { headers: headers(extra), signal });
      if (!response.ok) {
        const error = await failure(response);
        if (response.status === 401) return;
        throw error;
      }
      onStatus("live");
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      const parser = new EventParser((event) => {
        if (event.id !== null) lastId = event.id;
        onEvent(event.type, JSON.parse(event.data), event.id);
      });
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        parser.push(value);
      }
      onStatus("reconnecting (the stream ended)");
    } catch (error) {
      if (signal.aborted) return;
      onStatus(`reconnecting (${error.message})`);
    }
    await new Promise((resolve) => setTimeout(resolve, RECONNECT_MS));
  }
}
