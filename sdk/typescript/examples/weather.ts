/**
 * A tool worker: serves `tool::ts_weather`, a fixed forecast for a city.
 *
 *     node dist/examples/weather.js "nats://127.0.0.1:4222?namespace=tackroom"
 *
 * A harness offers it to a model with `tools=["tool::ts_weather"]`; the model sees it as
 * `ts_weather` (the `name` trait) and its arguments are checked against the request schema.
 */

import { connect } from "../src/index.js";
import { engineUrl, serveUntilStopped } from "./run.js";

interface WeatherRequest {
  city: string;
  _call?: unknown; // the orchestrator's call context (session, call id), not the model's
}

const requestSchema = {
  type: "object",
  properties: { city: { type: "string", description: "The city to forecast, e.g. Lisbon." } },
  required: ["city"],
  "x-tackroom": { idempotent: true, parallel: true, read_only: true, name: "ts_weather" },
};

const responseSchema = {
  type: "object",
  properties: {
    city: { type: "string" },
    forecast: { type: "string" },
    high_c: { type: "number" },
    low_c: { type: "number" },
  },
  required: ["city", "forecast", "high_c", "low_c"],
};

const worker = await connect({ url: engineUrl(), worker: "ts-weather" });
await worker.registerFunction<WeatherRequest>(
  "tool::ts_weather",
  ({ city }) => ({ city, forecast: "sunny", high_c: 21, low_c: 12 }),
  { description: "Tomorrow's weather forecast for a city.", requestSchema, responseSchema },
);
serveUntilStopped(worker, "tool::ts_weather");
