/**
 * Names on the server, exactly as the Python engine spells them
 * (src/tackroom/engine/nats/naming.py): every subject, stream and bucket starts with the
 * namespace, and free-form names (function ids, scopes, keys, streams, groups) are encoded into
 * one token of `[A-Za-z0-9_=-]`.
 */

const PLAIN = /^[A-Za-z0-9_-]$/;
const NAMESPACE_RE = /^[A-Za-z0-9_-]{1,48}$/;

export const DEFAULT_NAMESPACE = "tackroom";

/** One subject token / KV key part: `[A-Za-z0-9_-]` kept, every other UTF-8 byte as `=XX`. */
export function encodeToken(text: string): string {
  if (text === "") return "=";
  let out = "";
  for (const byte of Buffer.from(text, "utf8")) {
    const ch = String.fromCharCode(byte);
    out += PLAIN.test(ch) ? ch : `=${byte.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return out;
}

export function decodeToken(token: string): string {
  if (token === "=") return "";
  const bytes: number[] = [];
  for (let i = 0; i < token.length; ) {
    if (token[i] === "=") {
      bytes.push(parseInt(token.slice(i + 1, i + 3), 16));
      i += 3;
    } else {
      bytes.push(token.charCodeAt(i));
      i += 1;
    }
  }
  return Buffer.from(bytes).toString("utf8");
}

export function checkNamespace(namespace: string): string {
  if (!NAMESPACE_RE.test(namespace)) {
    throw new Error(`namespace ${JSON.stringify(namespace)} must be 1-48 of [A-Za-z0-9_-]`);
  }
  return namespace;
}

/** Subjects, streams and buckets of one namespace. */
export class Names {
  readonly stateBucket: string;
  readonly catalogBucket: string;
  readonly metaBucket: string;
  readonly queueStream: string;
  readonly deadStream: string;

  constructor(readonly ns: string) {
    this.stateBucket = `${ns}_state`;
    this.catalogBucket = `${ns}_catalog`;
    this.metaBucket = `${ns}_meta`;
    this.queueStream = `${ns}_queues`;
    this.deadStream = `${ns}_dead`;
  }

  functionSubject(functionId: string): string {
    return `${this.ns}.fn.${encodeToken(functionId)}`;
  }

  /** The key of a state value inside the state bucket. */
  stateKey(scope: string, key: string): string {
    return `${encodeToken(scope)}.${encodeToken(key)}`;
  }

  stateSubject(scope: string, key: string): string {
    return `$KV.${this.stateBucket}.${this.stateKey(scope, key)}`;
  }

  eventSubject(stream: string, group: string): string {
    return `${this.ns}.ev.${encodeToken(stream)}.${encodeToken(group)}`;
  }
}

/** What a tackroom engine URL says (`nats://[user:pass@]h1:p1[,h2:p2][?namespace=...&...]`). */
export interface ParsedUrl {
  servers: string[];
  user?: string;
  pass?: string;
  namespace?: string;
  inboxPrefix?: string;
  provision?: boolean;
  heartbeat?: number;
  connectTimeout?: number;
}

const BOOLEANS: Record<string, boolean> = { "1": true, true: true, yes: true, "0": false, false: false, no: false };

/**
 * Parse the same URL the Python engine takes, so one `--engine` string serves both. Options a
 * TypeScript worker has no use for (`partitions`, `replicas`, `history`) are accepted and ignored.
 */
export function parseEngineUrl(url: string): ParsedUrl {
  const match = /^(nats|tls):\/\/(?:([^@/]*)@)?([^/?]+)\/?(?:\?(.*))?$/.exec(url);
  if (!match) throw new Error(`not a NATS engine URL: ${url.replace(/\/\/[^@/]*@/, "//***@")}`);
  const [, scheme, userinfo, hostlist, query] = match;
  const parsed: ParsedUrl = {
    servers: (hostlist ?? "")
      .split(",")
      .filter((h) => h)
      .map((h) => `${scheme}://${h.includes(":") ? h : `${h}:4222`}`),
  };
  if (userinfo) {
    const [user, pass] = userinfo.split(":", 2);
    parsed.user = decodeURIComponent(user ?? "");
    if (pass !== undefined) parsed.pass = decodeURIComponent(pass);
  }
  const params = new URLSearchParams(query ?? "");
  const namespace = params.get("namespace");
  if (namespace) parsed.namespace = checkNamespace(namespace);
  const inbox = params.get("inbox_prefix");
  if (inbox) parsed.inboxPrefix = inbox;
  const provision = params.get("provision");
  if (provision !== null) {
    const value = BOOLEANS[provision.toLowerCase()];
    if (value === undefined) throw new Error("NATS URL: provision must be 1 or 0 (true or false)");
    parsed.provision = value;
  }
  const heartbeat = params.get("heartbeat");
  if (heartbeat !== null) parsed.heartbeat = Number(heartbeat);
  const connectTimeout = params.get("connect_timeout");
  if (connectTimeout !== null) parsed.connectTimeout = Number(connectTimeout);
  return parsed;
}
