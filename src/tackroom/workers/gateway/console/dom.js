// Building the page without innerHTML: every string from the API becomes a text node.

/** An element with props (`testid`, `class`, `on<event>`, attributes) and children. */
export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "testid") el.dataset.testid = value;
    else if (key === "class") el.className = value;
    else if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

/** Append children: nodes as they are, anything else as text (never parsed as HTML). */
export function append(el, children) {
  for (const child of [children].flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

export function clear(el) {
  el.replaceChildren();
  return el;
}

/** A link to a console route; path segments are URI-encoded. */
export function link(text, segments, props = {}) {
  const href = "#/" + segments.map((s) => encodeURIComponent(s)).join("/");
  return h("a", { href, ...props }, text);
}

export function when(seconds) {
  if (!seconds) return "";
  return new Date(seconds * 1000).toLocaleString();
}

export function usd(value) {
  return "$" + Number(value || 0).toFixed(4);
}

export function pretty(value) {
  return JSON.stringify(value ?? null, null, 2);
}

/** The text of content blocks (text, thinking, function calls and results). */
export function blocksText(blocks) {
  return (blocks || [])
    .map((b) => {
      if (b.type === "text" || b.type === "thinking") return b.text;
      if (b.type === "function_call") return `→ ${b.tool_name}(${JSON.stringify(b.arguments)})`;
      if (b.type === "function_result") return blocksText(b.content);
      if (b.type === "image") return `[image ${b.mime}]`;
      return "";
    })
    .filter(Boolean)
    .join("\n");
}

/** A line saying what went wrong, replacing the content of `el`. */
export function showError(el, error) {
  clear(el).append(h("p", { class: "error", role: "alert", testid: "error" }, String(error.message || error)));
}
