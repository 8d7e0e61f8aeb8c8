/**
 * The built-in flow rules of src/tackroom/contracts/flow.py, ported for the example policy
 * worker: prompt-injection containment, decided on the `flow` facts of a check (contracts/
 * provenance.py's FlowFacts: what the gate established, whatever the model says).
 *
 * - `secret-out` (deny): a value copied from a secret reaches a tool with external effects.
 * - `untrusted-destination` (deny): a destination argument (a tool's `sinks`) holds free text
 *   copied from untrusted content.
 * - `typed-destination` (needs approval): a destination a quarantined reader typed out of
 *   untrusted content.
 * - `untrusted-arguments` (needs approval): a tool with external effects gets an argument copied
 *   from untrusted free text.
 * - `untrusted-context` (needs approval): any call of a tool with external
 *   effects once the context holds untrusted content.
 *
 * The first rule (in this order: denials first) that the call triggers decides, with the rule id
 * `builtin:flow:<rule>`, the same reason as the Python rules and, for a rule about an argument,
 * `matched_constraint: {arg, op: "flow", value: <rule>}`.
 */

export type FlowRule =
  | "secret-out"
  | "untrusted-destination"
  | "typed-destination"
  | "untrusted-arguments"
  | "untrusted-context";

export const FLOW_RULES: readonly FlowRule[] = [
  "secret-out", "untrusted-destination", "typed-destination", "untrusted-arguments", "untrusted-context",
];
export const DEFAULT_FLOW_RULES: readonly FlowRule[] = FLOW_RULES;
const FLOW_RULE_PREFIX = "builtin:flow:";

type SideEffect = "none" | "internal" | "external";
const SIDE_EFFECTS: readonly SideEffect[] = ["none", "internal", "external"];

/** contracts/provenance.py's FlowFacts, with its defaults filled in. */
export interface FlowFacts {
  schema_version: 1;
  context_untrusted: boolean;
  untrusted_sources: string[];
  side_effect: SideEffect;
  sinks: string[];
  args_from_untrusted: Record<string, string[]>;
  args_from_typed: Record<string, string[]>;
  args_from_secret: Record<string, string[]>;
}

export interface FlowVerdict {
  schema_version: 1;
  decision: "deny" | "needs_approval";
  rule_id: string;
  matched_constraint?: { arg: string; op: "flow"; value: FlowRule };
  reason: string;
}

// -- the facts ---------------------------------------------------------------------------------

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function isStrings(value: unknown): value is string[] {
  return Array.isArray(value) && value.every((item) => typeof item === "string");
}

function strings(value: unknown, name: string, invalid: (why: string) => Error): string[] {
  if (value === undefined) return [];
  if (!isStrings(value)) throw invalid(`flow.${name} must be a list of strings`);
  return value;
}

function origins(value: unknown, name: string, invalid: (why: string) => Error): Record<string, string[]> {
  if (value === undefined) return {};
  if (!isObject(value) || !Object.values(value).every(isStrings)) {
    throw invalid(`flow.${name} must map argument names to lists of strings`);
  }
  return value as Record<string, string[]>;
}

const STRINGS = { type: "array", items: { type: "string" } };
const ORIGINS = { type: "object", additionalProperties: STRINGS };

/** FlowFacts as JSON Schema, for the request schema the worker announces. */
export const flowSchema = {
  type: "object",
  properties: {
    schema_version: { const: 1 },
    context_untrusted: { type: "boolean" },
    untrusted_sources: STRINGS,
    side_effect: { enum: SIDE_EFFECTS },
    sinks: STRINGS,
    args_from_untrusted: ORIGINS,
    args_from_typed: ORIGINS,
    args_from_secret: ORIGINS,
  },
  additionalProperties: false,
};
const FLOW_KEYS = Object.keys(flowSchema.properties);

/** `value` checked as FlowFacts (extra keys forbidden); `invalid` makes the error to throw. */
export function parseFlow(value: unknown, invalid: (why: string) => Error): FlowFacts {
  if (!isObject(value)) throw invalid("flow must be an object");
  const unknown = Object.keys(value).filter((key) => !FLOW_KEYS.includes(key));
  if (unknown.length) throw invalid(`unknown flow field${unknown.length > 1 ? "s" : ""} ${unknown.map((k) => JSON.stringify(k)).join(", ")}`);
  const { schema_version: version, context_untrusted: context, side_effect: effect } = value;
  if (version !== undefined && version !== 1) throw invalid(`flow.schema_version must be 1, not ${JSON.stringify(version)}`);
  if (context !== undefined && typeof context !== "boolean") throw invalid("flow.context_untrusted must be a boolean");
  if (effect !== undefined && !SIDE_EFFECTS.includes(effect as SideEffect)) {
    throw invalid(`flow.side_effect must be one of ${SIDE_EFFECTS.join(", ")}, not ${JSON.stringify(effect)}`);
  }
  return {
    schema_version: 1,
    context_untrusted: context ?? false,
    untrusted_sources: strings(value.untrusted_sources, "untrusted_sources", invalid),
    side_effect: (effect as SideEffect | undefined) ?? "external",
    sinks: strings(value.sinks, "sinks", invalid),
    args_from_untrusted: origins(value.args_from_untrusted, "args_from_untrusted", invalid),
    args_from_typed: origins(value.args_from_typed, "args_from_typed", invalid),
    args_from_secret: origins(value.args_from_secret, "args_from_secret", invalid),
  };
}

/** The config's `flow_rules`: the default set when absent, else a list of rule names. */
export function parseFlowRules(value: unknown): FlowRule[] {
  if (value === undefined || value === null) return [...DEFAULT_FLOW_RULES];
  if (!Array.isArray(value) || !value.every((rule) => FLOW_RULES.includes(rule as FlowRule))) {
    throw new Error(`flow_rules must be a list of ${FLOW_RULES.join(", ")}`);
  }
  return value as FlowRule[];
}

// -- the rules ---------------------------------------------------------------------------------

/** The origins `map` gives the argument `arg` (own keys only: a sink named `constructor` is no
 * inherited function). */
function originsOf(map: Record<string, string[]>, arg: string): string[] {
  return Object.hasOwn(map, arg) ? (map[arg] ?? []) : [];
}

/** Origins as a reason names them: the first three, and how many more. */
function names(list: string[]): string {
  const listed = [...new Set(list)];
  return listed.slice(0, 3).join(", ") + (listed.length > 3 ? ` and ${listed.length - 3} more` : "");
}

function verdict(rule: FlowRule, decision: FlowVerdict["decision"], arg: string | null, reason: string): FlowVerdict {
  return {
    schema_version: 1,
    decision,
    rule_id: FLOW_RULE_PREFIX + rule,
    ...(arg === null ? {} : { matched_constraint: { arg, op: "flow" as const, value: rule } }),
    reason,
  };
}

type Check = (id: string, flow: FlowFacts) => FlowVerdict | undefined;

const secretOut: Check = (id, flow) => {
  if (flow.side_effect !== "external") return undefined;
  const [first] = Object.entries(flow.args_from_secret);
  if (!first) return undefined;
  const [arg, from] = first;
  return verdict("secret-out", "deny", arg,
    `${arg} holds a secret from ${names(from)}, and ${id} sends data out: a secret never leaves through a tool call`);
};

const untrustedDestination: Check = (id, flow) => {
  const arg = flow.sinks.find((sink) => originsOf(flow.args_from_untrusted, sink).length);
  if (arg === undefined) return undefined;
  return verdict("untrusted-destination", "deny", arg,
    `${arg} of ${id} was copied from what ${names(originsOf(flow.args_from_untrusted, arg))} returned, which nobody vouches for: ` +
    "a destination may not come from untrusted content (ask the user for it)");
};

const typedDestination: Check = (id, flow) => {
  const arg = flow.sinks.find((sink) => originsOf(flow.args_from_typed, sink).length);
  if (arg === undefined) return undefined;
  return verdict("typed-destination", "needs_approval", arg,
    `${arg} of ${id} was read out of untrusted content from ${names(originsOf(flow.args_from_typed, arg))}: a person confirms the destination`);
};

const untrustedArguments: Check = (id, flow) => {
  if (flow.side_effect !== "external") return undefined;
  const [first] = Object.entries(flow.args_from_untrusted);
  if (!first) return undefined;
  const [arg, from] = first;
  return verdict("untrusted-arguments", "needs_approval", arg,
    `${arg} of ${id} was copied from what ${names(from)} returned, which nobody vouches for, and ${id} acts outside: a person confirms it`);
};

const untrustedContext: Check = (id, flow) => {
  if (flow.side_effect !== "external" || !flow.context_untrusted) return undefined;
  return verdict("untrusted-context", "needs_approval", null,
    `the model read untrusted content from ${names(flow.untrusted_sources)} before asking for ${id}, which acts outside: a person confirms it`);
};

const CHECKS: Record<FlowRule, Check> = {
  "secret-out": secretOut,
  "untrusted-destination": untrustedDestination,
  "typed-destination": typedDestination,
  "untrusted-arguments": untrustedArguments,
  "untrusted-context": untrustedContext,
};

/** The first of `rules` (in FLOW_RULES order: denials first) that the call's flow triggers. */
export function flowVerdict(id: string, flow: FlowFacts | undefined, rules: readonly FlowRule[]): FlowVerdict | undefined {
  if (flow === undefined) return undefined;
  for (const rule of FLOW_RULES) {
    const found = rules.includes(rule) ? CHECKS[rule](id, flow) : undefined;
    if (found) return found;
  }
  return undefined;
}
