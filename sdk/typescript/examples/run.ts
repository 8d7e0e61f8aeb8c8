/** What the examples share: the engine URL from argv or $TACKROOM_ENGINE, their config section
 * from $TACKROOM_WORKER_CONFIG, the SDK's version, a clean exit. */

import { readFileSync } from "node:fs";
import type { Worker } from "../src/index.js";

export function engineUrl(): string {
  const url = process.argv[2] ?? process.env.TACKROOM_ENGINE;
  if (!url) {
    console.error("usage: node dist/examples/<worker>.js nats://host:port?namespace=NS (or set TACKROOM_ENGINE)");
    process.exit(2);
  }
  return url;
}

/** Print why the worker cannot start, and exit 2 (a parent process shows the line). */
export function fail(message: string): never {
  console.error(message);
  process.exit(2);
}

/** The worker's config section: the JSON object in $TACKROOM_WORKER_CONFIG (what `tackroom
 * worker run` and the contract suites' `worker_command` pass), `{}` when it is unset. */
export function workerConfig(): Record<string, unknown> {
  const raw = process.env.TACKROOM_WORKER_CONFIG;
  if (raw === undefined || raw.trim() === "") return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch (error) {
    fail(`TACKROOM_WORKER_CONFIG is not JSON: ${String(error)}`);
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    fail("TACKROOM_WORKER_CONFIG must be a JSON object (the worker's config section)");
  }
  return parsed as Record<string, unknown>;
}

/** The SDK's version (its package.json, two levels above dist/examples/), announced in the
 * catalog as the examples' own. */
export const VERSION: string = (() => {
  try {
    const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version?: unknown };
    if (typeof pkg.version === "string" && pkg.version) return pkg.version;
  } catch {
    // run from somewhere else than dist/examples: the version this SDK was written as
  }
  return "0.1.0";
})();

/** Say "ready" on stdout (a parent process waits for it), then close on SIGTERM / SIGINT. */
export function serveUntilStopped(worker: Worker, what: string): void {
  console.log(`ready: ${what} (namespace ${worker.names.ns})`);
  const stop = (): void => {
    worker.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once("SIGTERM", stop);
  process.once("SIGINT", stop);
}
