// Where an entry's content came from, as badges a reader sees at a glance: content nobody vouches
// for (`untrusted · http::fetch +2`, every origin in the tooltip), typed, secret — in words, so
// the colour is never the only sign.

import { h } from "./dom.js";

const MAX_ORIGIN = 40;
const SOURCES = {
  untrusted: "from a source nobody vouches for",
  user: "from the person the run acts for",
  system: "from the harness or the application",
  model: "written by the model",
  tool: "from a tool the application trusts",
};

/** `http::fetch +2`: the first origin (cut when long) and how many more. */
export function originsText(origins) {
  if (!origins.length) return "";
  const first = origins[0].length > MAX_ORIGIN ? `${origins[0].slice(0, MAX_ORIGIN - 1)}…` : origins[0];
  return origins.length > 1 ? `${first} +${origins.length - 1}` : first;
}

function sourceBadge({ source, origins = [] }) {
  const title = `${SOURCES[source] || source}${origins.length ? `: ${origins.join(", ")}` : ""}`;
  const text = origins.length ? `${source} · ${originsText(origins)}` : source;
  return h("span", { class: `badge source ${source}`, testid: "label-source", title }, text);
}

/** The badges of a message's label; null when it carries none. */
export function labelBadges(label) {
  if (!label) return null;
  const typed = label.typed ? h("span", { class: "badge typed", testid: "label-typed", title: "untrusted, but validated against a schema: no free text" }, "typed") : null;
  const secret = label.secret ? h("span", { class: "badge secret", testid: "label-secret", title: "holds a secret: never sent out by a tool" }, "secret") : null;
  return h("span", { class: "labels", testid: "label" }, sourceBadge(label), typed, secret);
}

/** The classes of an element showing labelled content: ` untrusted`, ` secret`. */
export function labelClasses(label) {
  if (!label) return "";
  return `${label.source === "untrusted" ? " untrusted" : ""}${label.secret ? " secret" : ""}`;
}
