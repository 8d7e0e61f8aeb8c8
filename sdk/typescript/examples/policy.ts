/**
 * A policy worker: serves `policy::check_permissions` (the contract in
 * src/tackroom/contracts/policy.py: CheckRequest → CheckResponse).
 *
 *     node dist/examples/policy.js "nats://127.0.0.1:4222?namespace=tackroom"
 *
 * Boot the harness without the Python `policy` worker (or point the orchestrator's
 * `policy_function` here), or both serve the id and share its calls.
 *
 * Every check is validated as `CheckRequest` (an object with a `function_id` free of whitespace
 * and control characters, `args` an object, no unknown keys, `schema_version` 1 if given…): any
 * other payload fails with the typed error `invalid_request`; so does a `flow` (the call's data
 * flow, contracts/provenance.py's FlowFacts) that is not an object of its fields. Then the
 * protected functions are denied (`builtin:protected`, before any rule, as every policy worker
 * must), then the built-in flow rules of flow.ts decide (prompt-injection containment, the rules
 * of contracts/flow.py: `builtin:flow:secret-out`…) — those named in the config's `flow_rules`,
 * all but `untrusted-context` when it is unset, none for `[]`. Then:
 *
 * - without a rules file (TACKROOM_WORKER_CONFIG unset, or without `rules_path`):
 *   `tool::ts_weather` is allowed and everything else denied, with the rule `ts:allow-list`;
 * - with TACKROOM_WORKER_CONFIG = `{"rules_path": FILE}` (beside `"flow_rules": [...]`, if
 *   set): the rules in FILE, a small JSON language, decide — first match wins, and no match
 *   gives the default decision:
 *
 *     {
 *       "default_decision": "needs_approval",        // allow | deny | needs_approval (default:
 *                                                    // needs_approval); rule_id builtin:default
 *       "rules": [
 *         {"id": "read-files", "functions": ["fs::read", "fs::list"], "decision": "allow"},
 *         {"id": "git-read", "functions": ["shell::exec"], "decision": "allow",
 *          "args": {"command": {"one_of": ["git status", "git log", "git diff"]}}},
 *         {"id": "no-shell", "functions": ["shell::*"], "decision": "deny", "reason": "shell is off"},
 *         {"id": "write-notes", "functions": ["fs::write"], "decision": "needs_approval",
 *          "args": {"path": {"under": "notes"}}}
 *       ]
 *     }
 *
 *   A rule applies when one of its `functions` globs matches the whole function id (`*` matches
 *   anything, `::` included; every other character only itself) and every constraint in `args`
 *   holds. A constraint holds only for an argument that is present: `{"one_of": [values]}` — the
 *   argument equals one of the values as a whole JSON value (`"git status; rm -rf /"` is not
 *   `"git status"`, `"1"` is not `1`); `{"under": "dir"}` — the argument is a string path inside
 *   `dir` once both are normalized lexically (`notes/../x` is not inside `notes`, nor is
 *   `notesX/a`; a relative path is never inside an absolute directory or the other way round).
 *   The answer names the rule (`rule_id`), its `reason` (or one made from the rule) and, for a
 *   rule with constraints, the first of them (`matched_constraint: {arg, op, value}`).
 *   A file that does not parse or breaks this shape (unknown keys included) stops the worker
 *   before it says ready, with the reason on stderr.
 */

import { readFileSync } from "node:fs";
import { connect, FunctionError } from "../src/index.js";
import { type FlowFacts, type FlowRule, flowSchema, flowVerdict, parseFlow, parseFlowRules } from "./flow.js";
import { engineUrl, fail, serveUntilStopped, VERSION, workerConfig } from "./run.js";

type Decision = "allow" | "deny" | "needs_approval";

interface CheckRequest {
  schema_version?: 1;
  function_id: string;
  args?: Record<string, unknown>;
  session_id?: string | null;
  principal?: string | null;
  roles?: string[];
  required_permission?: string | null;
  tenant?: string | null;
  flow?: FlowFacts;
}

interface MatchedConstraint {
  arg: string;
  op: string;
  value: unknown;
}

interface CheckResponse {
  schema_version: 1;
  decision: Decision;
  rule_id: string | null;
  matched_constraint?: MatchedConstraint;
  reason: string;
}

const DECISIONS: readonly Decision[] = ["allow", "deny", "needs_approval"];

/** contracts/policy.py PROTECTED_FUNCTIONS and UNPROTECTED_READS, copied (the Python test of this
 * worker checks every one of them against the live worker). */
const PROTECTED = [
  "approval::*", "policy::*", "auth::get_token", "auth::set_token", "auth::delete_token", "budget::*",
  "state::*", "stream::*", "engine::*", "run::*", "turn::*", "hook-fanout::*", "hook::*", "provider::*",
  "session-tree::*", "session-inbox::*", "models::reconcile", "directory::skills::register",
];
const UNPROTECTED_READS = ["budget::list", "budget::get", "budget::usage", "budget::forecast"];
const ALLOWED = ["tool::ts_weather"];

/** A function-id glob as an anchored regex: `*` matches anything, every other character itself. */
function glob(pattern: string): RegExp {
  const parts = pattern.split("*").map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
  return new RegExp(`^${parts.join(".*")}$`, "s");
}

const PROTECTED_GLOBS = PROTECTED.map((pattern) => ({ pattern, regex: glob(pattern) }));

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function typeName(value: unknown): string {
  return value === null ? "null" : Array.isArray(value) ? "array" : typeof value;
}

// -- the request ------------------------------------------------------------------------------

const REQUEST_KEYS = new Set([
  "schema_version", "function_id", "args", "session_id", "principal", "roles", "required_permission", "tenant", "flow",
]);
const FUNCTION_ID = /^[^\s\x00-\x1f\x7f]+$/u;

function invalid(why: string): FunctionError {
  return new FunctionError("invalid_request", `policy::check_permissions: ${why}`);
}

/** `payload` checked as contracts/policy.py's CheckRequest (extra keys forbidden). */
function parseRequest(payload: unknown): CheckRequest {
  if (!isObject(payload)) throw invalid(`the request must be an object, not ${typeName(payload)}`);
  const unknown = Object.keys(payload).filter((key) => !REQUEST_KEYS.has(key));
  if (unknown.length) throw invalid(`unknown field${unknown.length > 1 ? "s" : ""} ${unknown.map((k) => JSON.stringify(k)).join(", ")}`);
  const { schema_version: version, function_id: id, args, roles } = payload;
  if (version !== undefined && version !== 1) throw invalid(`schema_version must be 1, not ${JSON.stringify(version)}`);
  if (typeof id !== "string") throw invalid(`function_id must be a string, not ${typeName(id)}`);
  const length = [...id].length;
  if (length < 1 || length > 512) throw invalid("function_id must be 1 to 512 characters long");
  if (!FUNCTION_ID.test(id)) throw invalid(`function_id ${JSON.stringify(id)} holds whitespace or control characters`);
  if (args !== undefined && !isObject(args)) throw invalid(`args must be an object, not ${typeName(args)}`);
  for (const key of ["session_id", "principal", "required_permission", "tenant"]) {
    const value = payload[key];
    if (value !== undefined && value !== null && typeof value !== "string") {
      throw invalid(`${key} must be a string or null, not ${typeName(value)}`);
    }
  }
  if (typeof payload.tenant === "string" && [...payload.tenant].length > 63) throw invalid("tenant is longer than 63 characters");
  if (roles !== undefined && !(Array.isArray(roles) && roles.every((role) => typeof role === "string"))) {
    throw invalid("roles must be a list of strings");
  }
  const flow = payload.flow === undefined || payload.flow === null ? undefined : parseFlow(payload.flow, invalid);
  return { ...payload, flow } as unknown as CheckRequest;
}

// -- values and paths --------------------------------------------------------------------------

/** Equality of JSON values by JSON type: `"0"` is not `0`, `true` is not `1`. */
function jsonEqual(left: unknown, right: unknown): boolean {
  if (Array.isArray(left) || Array.isArray(right)) {
    if (!Array.isArray(left) || !Array.isArray(right) || left.length !== right.length) return false;
    return left.every((item, i) => jsonEqual(item, right[i]));
  }
  if (isObject(left) && isObject(right)) {
    const keys = Object.keys(left);
    if (keys.length !== Object.keys(right).length) return false;
    return keys.every((key) => Object.hasOwn(right, key) && jsonEqual(left[key], right[key]));
  }
  return left === right;
}

/** `path` normalized lexically as POSIX (`//` → `/`, `.` and `..` folded, no trailing `/`), as
 * Python's `posixpath.normpath`; `null` for no path at all (empty, or holding a NUL). */
function normalizePath(path: string): string | null {
  if (path === "" || path.includes("\0")) return null;
  const absolute = path.startsWith("/");
  const parts: string[] = [];
  for (const part of path.split("/")) {
    if (part === "" || part === ".") continue;
    if (part !== "..") parts.push(part);
    else if (parts.length && parts[parts.length - 1] !== "..") parts.pop();
    else if (!absolute) parts.push("..");
  }
  const joined = parts.join("/");
  return absolute ? `/${joined}` : joined || ".";
}

function climbsOut(normal: string): boolean {
  return normal === ".." || normal.startsWith("../");
}

/** Is `path` the directory `base` (normalized) or inside it, by whole components? */
function isUnder(path: string, base: string): boolean {
  const normal = normalizePath(path);
  if (normal === null || normal.startsWith("/") !== base.startsWith("/") || climbsOut(normal)) return false;
  if (base === "." || base === "/") return true;
  return normal === base || normal.startsWith(`${base}/`);
}

// -- the rules file ----------------------------------------------------------------------------

interface Constraint extends MatchedConstraint {
  holds(value: unknown): boolean;
}

interface Rule {
  id: string;
  globs: RegExp[];
  decision: Decision;
  reason: string | undefined;
  constraints: Constraint[];
}

interface Ruleset {
  defaultDecision: Decision;
  rules: Rule[];
}

function constraint(where: string, arg: string, spec: unknown): Constraint {
  if (!isObject(spec) || Object.keys(spec).length !== 1) {
    throw new Error(`${where}: a constraint is one of {"one_of": [values]} or {"under": "dir"}`);
  }
  const [[op, operand]] = Object.entries(spec) as [[string, unknown]];
  if (op === "one_of") {
    if (!Array.isArray(operand) || operand.length === 0) throw new Error(`${where}: one_of takes a non-empty list of values`);
    return { arg, op, value: operand, holds: (value) => operand.some((choice) => jsonEqual(value, choice)) };
  }
  if (op === "under") {
    const base = typeof operand === "string" ? normalizePath(operand) : null;
    if (base === null) throw new Error(`${where}: under takes a non-empty directory path`);
    if (climbsOut(base)) throw new Error(`${where}: under ${JSON.stringify(operand)} climbs out of the working directory`);
    return { arg, op, value: operand, holds: (value) => typeof value === "string" && isUnder(value, base) };
  }
  throw new Error(`${where}: unknown constraint ${JSON.stringify(op)} (one_of or under)`);
}

function decision(where: string, value: unknown): Decision {
  if (!DECISIONS.includes(value as Decision)) {
    throw new Error(`${where} must be one of ${DECISIONS.join(", ")}, not ${JSON.stringify(value)}`);
  }
  return value as Decision;
}

const RULE_KEYS = new Set(["id", "functions", "decision", "reason", "args"]);

function loadRules(path: string): Ruleset {
  const text = readFileSync(path, "utf8");
  const file: unknown = JSON.parse(text);
  if (!isObject(file)) throw new Error("the file must hold a JSON object");
  const extra = Object.keys(file).filter((key) => key !== "default_decision" && key !== "rules");
  if (extra.length) throw new Error(`unknown key ${JSON.stringify(extra[0])} (default_decision, rules)`);
  if (!Array.isArray(file.rules)) throw new Error("rules must be a list");
  const seen = new Set<string>();
  const rules = file.rules.map((rule: unknown, index): Rule => {
    const where = `rules[${index}]`;
    if (!isObject(rule)) throw new Error(`${where} must be an object`);
    const unknown = Object.keys(rule).find((key) => !RULE_KEYS.has(key));
    if (unknown !== undefined) throw new Error(`${where}: unknown key ${JSON.stringify(unknown)} (${[...RULE_KEYS].join(", ")})`);
    const { id, functions, reason, args } = rule;
    if (typeof id !== "string" || id.trim() === "") throw new Error(`${where}: id must be a non-empty string`);
    if (seen.has(id)) throw new Error(`${where}: the id ${JSON.stringify(id)} is taken`);
    seen.add(id);
    if (!Array.isArray(functions) || functions.length === 0 || !functions.every((f) => typeof f === "string" && f !== "")) {
      throw new Error(`${where} (${id}): functions must be a non-empty list of function-id globs`);
    }
    if (reason !== undefined && (typeof reason !== "string" || reason.trim() === "")) {
      throw new Error(`${where} (${id}): reason must be a non-empty string`);
    }
    if (args !== undefined && !isObject(args)) throw new Error(`${where} (${id}): args must map argument names to constraints`);
    return {
      id,
      globs: (functions as string[]).map(glob),
      decision: decision(`${where} (${id}): decision`, rule.decision),
      reason,
      constraints: Object.entries(args ?? {}).map(([arg, spec]) => constraint(`${where} (${id}): args.${arg}`, arg, spec)),
    };
  });
  const defaultDecision = file.default_decision === undefined ? "needs_approval" : decision("default_decision", file.default_decision);
  return { defaultDecision, rules };
}

// -- deciding ----------------------------------------------------------------------------------

function protectedVerdict(id: string): CheckResponse | undefined {
  if (UNPROTECTED_READS.includes(id)) return undefined;
  const covering = PROTECTED_GLOBS.find(({ regex }) => regex.test(id));
  if (!covering) return undefined;
  return {
    schema_version: 1,
    decision: "deny",
    rule_id: "builtin:protected",
    reason: `${id} is protected (${covering.pattern}): no model may call it, whatever the rules say`,
  };
}

function allowList(id: string): CheckResponse {
  if (ALLOWED.includes(id)) {
    return { schema_version: 1, decision: "allow", rule_id: "ts:allow-list", reason: `${id} is on the allow list` };
  }
  return { schema_version: 1, decision: "deny", rule_id: "ts:allow-list", reason: `${id} is not on the allow list` };
}

function evaluate(ruleset: Ruleset, id: string, args: Record<string, unknown>): CheckResponse {
  for (const rule of ruleset.rules) {
    if (!rule.globs.some((regex) => regex.test(id))) continue;
    if (!rule.constraints.every((c) => Object.hasOwn(args, c.arg) && c.holds(args[c.arg]))) continue;
    const first = rule.constraints[0];
    const matched = first ? { arg: first.arg, op: first.op, value: first.value } : undefined;
    const because = matched ? ` (${matched.arg} ${matched.op} ${JSON.stringify(matched.value)})` : "";
    return {
      schema_version: 1,
      decision: rule.decision,
      rule_id: rule.id,
      ...(matched ? { matched_constraint: matched } : {}),
      reason: rule.reason ?? `rule '${rule.id}': ${rule.decision}${because}`,
    };
  }
  const fallback = ruleset.defaultDecision;
  return {
    schema_version: 1,
    decision: fallback,
    rule_id: "builtin:default",
    reason: `no rule matched ${id}; the default decision is ${fallback}`,
  };
}

function checker(ruleset: Ruleset | undefined, flowRules: readonly FlowRule[]): (payload: unknown) => CheckResponse {
  return (payload) => {
    const request = parseRequest(payload);
    const id = request.function_id;
    return protectedVerdict(id) ??
      flowVerdict(id, request.flow, flowRules) ??
      (ruleset ? evaluate(ruleset, id, request.args ?? {}) : allowList(id));
  };
}

// -- serving -----------------------------------------------------------------------------------

const config = workerConfig();
let flowRules: FlowRule[];
try {
  flowRules = parseFlowRules(config.flow_rules);
} catch (error) {
  fail(error instanceof Error ? error.message : String(error));
}
let ruleset: Ruleset | undefined;
if (config.rules_path !== undefined && config.rules_path !== null) {
  if (typeof config.rules_path !== "string" || config.rules_path === "") fail("rules_path must be a file path");
  try {
    ruleset = loadRules(config.rules_path);
  } catch (error) {
    fail(`${config.rules_path}: ${error instanceof Error ? error.message : String(error)}`);
  }
}

const requestSchema = {
  type: "object",
  properties: {
    schema_version: { const: 1 },
    function_id: { type: "string", minLength: 1, maxLength: 512, pattern: "^[^\\s\\x00-\\x1f\\x7f]+$" },
    args: { type: "object" },
    session_id: { type: ["string", "null"] },
    principal: { type: ["string", "null"] },
    roles: { type: "array", items: { type: "string" } },
    required_permission: { type: ["string", "null"] },
    tenant: { type: ["string", "null"], maxLength: 63 },
    flow: { ...flowSchema, type: ["object", "null"] },
  },
  required: ["function_id"],
  additionalProperties: false,
};

const responseSchema = {
  type: "object",
  properties: {
    schema_version: { const: 1 },
    decision: { enum: DECISIONS },
    rule_id: { type: ["string", "null"] },
    matched_constraint: {
      type: "object",
      properties: { arg: { type: "string" }, op: { type: "string" }, value: {} },
      required: ["arg", "op", "value"],
    },
    reason: { type: "string", minLength: 1 },
  },
  required: ["decision", "reason"],
};

const worker = await connect({ url: engineUrl(), worker: "ts-policy", version: VERSION });
await worker.registerFunction<unknown, CheckResponse>("policy::check_permissions", checker(ruleset, flowRules), {
  description: ruleset
    ? `May a model's call run? The ${ruleset.rules.length} JSON rules of ${String(config.rules_path)} (TypeScript).`
    : "May a model's call run? allow tool::ts_weather, deny the rest (TypeScript).",
  requestSchema,
  responseSchema,
  hop: true, // as the Python contract declares it: plumbing, no span of its own
  contractVersion: 1,
});
serveUntilStopped(worker, ruleset ? `policy::check_permissions (${String(config.rules_path)})` : "policy::check_permissions");
