/** What both examples share: the engine URL from argv or $TACKROOM_ENGINE, a clean exit. */

import type { Worker } from "../src/index.js";

export function engineUrl(): string {
  const url = process.argv[2] ?? process.env.TACKROOM_ENGINE;
  if (!url) {
    console.error("usage: node dist/examples/<worker>.js nats://host:port?namespace=NS (or set TACKROOM_ENGINE)");
    process.exit(2);
  }
  return url;
}

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
