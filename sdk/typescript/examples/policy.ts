/**
 * A policy worker: serves `policy::check_permissions` (the contract in
 * src/tackroom/contracts/policy.py: CheckRequest → CheckResponse). It denies the protected
 * functions first (`builtin:protected`, as every policy worker must), allows `tool::ts_weather`
 * and denies everything else with the rule `ts:allow-list`.
 *
 *     node dist/examples/policy.js "nats://127.0.0.1:4222?namespace=tackroom"
 *
 * Boot the harness without the Python `policy` worker (or point the orchestrator's
 * `policy_function` here), or both serve the id and share its calls.
 */

import { connect } from "../src/index.js";
import { engineUrl, serveUntilStopped } from "./run.js";

interface CheckRequest {
  schema_version: 1;
  function_id: string;
  args?: Record<string, unknown>;
  session_id?: string | null;
  principal?: string | null;
  roles?: string[];
}

interface CheckResponse {
  schema_version: 1;
  decision: "allow" | "deny" | "needs_approval";
  rule_id: string | null;
  reason: string;
}

/** contracts/policy.py PROTECTED_FUNCTIONS and UNPROTECTED_READS, copied. */
const PROTECTED = [
  "approval::*", "policy::*", "auth::get_token", "auth::set_token", "auth::delete_token", "budget::*",
  "state::*", "stream::*", "engine::*", "run::*", "turn::*", "hook-fanout::*", "hook::*", "provider::*",
  "session-tree::*", "session-inbox::*", "models::reconcile", "directory::skills::register",
];
const UNPROTECTED_READS = ["budget::list", "budget::get", "budget::usage", "budget::forecast"];
const ALLOWED = ["tool::ts_weather"];

function glob(pattern: string): RegExp {
  const parts = pattern.split("*").map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
  return new RegExp(`^${parts.join(".*")}$`, "s");
}

function check({ function_id: id }: CheckRequest): CheckResponse {
  const covering = UNPROTECTED_READS.includes(id) ? undefined : PROTECTED.find((p) => glob(p).test(id));
  if (covering) {
    return {
      schema_version: 1,
      decision: "deny",
      rule_id: "builtin:protected",
      reason: `${id} is protected (${covering}): no model may call it, whatever the rules say`,
    };
  }
  if (ALLOWED.includes(id)) {
    return { schema_version: 1, decision: "allow", rule_id: "ts:allow-list", reason: `${id} is on the allow list` };
  }
  return { schema_version: 1, decision: "deny", rule_id: "ts:allow-list", reason: `${id} is not on the allow list` };
}

const requestSchema = {
  type: "object",
  properties: {
    schema_version: { const: 1 },
    function_id: { type: "string", minLength: 1 },
    args: { type: "object" },
    session_id: { type: ["string", "null"] },
    principal: { type: ["string", "null"] },
    roles: { type: "array", items: { type: "string" } },
  },
  required: ["function_id"],
};

const responseSchema = {
  type: "object",
  properties: {
    schema_version: { const: 1 },
    decision: { enum: ["allow", "deny", "needs_approval"] },
    rule_id: { type: ["string", "null"] },
    reason: { type: "string", minLength: 1 },
  },
  required: ["decision", "reason"],
};

const worker = await connect({ url: engineUrl(), worker: "ts-policy" });
await worker.registerFunction<CheckRequest, CheckResponse>("policy::check_permissions", check, {
  description: "May a model's call run? allow tool::ts_weather, deny the rest (TypeScript).",
  requestSchema,
  responseSchema,
  hop: true, // as the Python contract declares it: plumbing, no span of its own
});
serveUntilStopped(worker, "policy::check_permissions");
