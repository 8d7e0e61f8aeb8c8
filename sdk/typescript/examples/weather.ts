/**
 * A tool worker: serves `tool::ts_weather`, a fixed forecast for a city.
 *
 *     node dist/examples/weather.js "nats://127.0.0.1:4222?namespace=tackroom"
 *
 * A harness offers it to a model with `tools=["tool::ts_weather"]`; the model sees it as
 * `ts_weather` (the `name` trait) and the orchestrator checks its arguments against the request
 * schema. The SDK does not validate payloads, so the handler checks them itself (any caller may
 * trigger the id): a payload that is not an object, a `city` that is missing, not a string or
 * empty, or any key but `city` and `_call` (the orchestrator's call context) fails with the
 * typed error `invalid_request` — what the Python `ToolContract` suite asks of every tool
 * (tests/sdk/test_typescript_contracts.py runs it against this worker).
 */

import { connect, FunctionError } from "../src/index.js";
import { engineUrl, serveUntilStopped, VERSION } from "./run.js";

interface WeatherRequest {
  city: string;
  _call?: unknown; // the orchestrator's call context (session, call id), not the model's
}

interface Forecast {
  city: string;
  forecast: string;
  high_c: number;
  low_c: number;
}

const requestSchema = {
  type: "object",
  properties: { city: { type: "string", minLength: 1, description: "The city to forecast, e.g. Lisbon." } },
  required: ["city"],
  additionalProperties: false,
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

const ACCEPTED = new Set(["city", "_call"]);

function typeName(value: unknown): string {
  return value === null ? "null" : Array.isArray(value) ? "an array" : typeof value;
}

/** The request, checked against `requestSchema` by hand; `invalid_request` if it breaks it. */
function parse(payload: unknown): WeatherRequest {
  const invalid = (why: string) => new FunctionError("invalid_request", `tool::ts_weather: ${why}`);
  if (typeof payload !== "object" || payload === null || Array.isArray(payload)) {
    throw invalid(`the arguments must be an object, not ${typeName(payload)}`);
  }
  const unknown = Object.keys(payload).filter((key) => !ACCEPTED.has(key));
  if (unknown.length) throw invalid(`unknown argument(s) ${unknown.map((k) => JSON.stringify(k)).join(", ")}`);
  const { city } = payload as { city?: unknown };
  if (city === undefined) throw invalid("city is required");
  if (typeof city !== "string") throw invalid(`city must be a string, not ${typeName(city)}`);
  if (city.length === 0) throw invalid("city must not be empty");
  return { city };
}

const worker = await connect({ url: engineUrl(), worker: "ts-weather", version: VERSION });
await worker.registerFunction<unknown, Forecast>(
  "tool::ts_weather",
  (payload) => {
    const { city } = parse(payload);
    return { city, forecast: "sunny", high_c: 21, low_c: 12 };
  },
  { description: "Tomorrow's weather forecast for a city.", requestSchema, responseSchema, contractVersion: 1 },
);
serveUntilStopped(worker, "tool::ts_weather");
