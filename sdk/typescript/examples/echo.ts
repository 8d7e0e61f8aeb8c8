/**
 * An echo worker: serves `bench::echo_ts`, which returns its payload unchanged.
 *
 *     node dist/examples/echo.js "nats://127.0.0.1:4222?namespace=tackroom"
 *
 * The smallest function a TypeScript worker can serve: bench/engine.py --cross-language times
 * `engine.trigger` from Python to it against the same echo served by a Python process.
 */

import { connect } from "../src/index.js";
import { engineUrl, serveUntilStopped, VERSION } from "./run.js";

const worker = await connect({ url: engineUrl(), worker: "ts-echo", version: VERSION });
await worker.registerFunction<unknown, unknown>("bench::echo_ts", (payload) => payload, {
  description: "Returns its payload unchanged (a benchmark's round trip).",
});
serveUntilStopped(worker, "bench::echo_ts");
