/**
 * W3C trace context, as the Python engine propagates it (src/tackroom/engine/tracing.py):
 * `traceparent` and `baggage` ride as NATS headers on every call.
 *
 * What this module does, and does not: an incoming call's `traceparent` is read, the invocation
 * gets a span id of its own (a child of the caller's span, same trace id), and every call the
 * handler makes through its context carries that span id as the parent. So the trace id flows
 * through a TypeScript worker unbroken and the Python spans made downstream name this
 * invocation as their parent. The SDK exports nothing: a finished span is handed to the
 * `onSpan` hook given to `connect` (if any), which may log it or forward it to a collector. With
 * no hook the span ids still propagate, and a trace viewer shows the downstream spans under a
 * parent it never received.
 */

import { randomBytes } from "node:crypto";

/** Baggage keys the engine takes from a payload's fields (`session_id` → `session.id`...). */
export const BAGGAGE_FROM_PAYLOAD: Readonly<Record<string, string>> = {
  session_id: "session.id",
  run_id: "run.id",
  message_id: "message.id",
};

/** Baggage naming the function whose next invocation the caller's own span stands for. */
export const CALLER_SPAN_BAGGAGE = "tackroom.span.by_caller";

export interface SpanContext {
  traceId: string;
  spanId: string;
  flags: string;
}

/** What travels with a call: the span in force (if any) and the baggage. */
export interface TraceContext {
  span?: SpanContext;
  baggage: Map<string, string>;
}

/** A span this worker made for one invocation (see `connect({onSpan})`). */
export interface FinishedSpan {
  name: string;
  kind: "server";
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  startTimeMs: number;
  endTimeMs: number;
  status: "ok" | "error";
  error?: string;
  attributes: Record<string, string>;
}

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

export function parseTraceparent(header: string | undefined): SpanContext | undefined {
  const match = header ? TRACEPARENT.exec(header.trim()) : null;
  if (!match || match[1] === "ff") return undefined;
  const [, , traceId = "", spanId = "", flags = "00"] = match;
  if (/^0+$/.test(traceId) || /^0+$/.test(spanId)) return undefined;
  return { traceId, spanId, flags };
}

export function formatTraceparent(span: SpanContext): string {
  return `00-${span.traceId}-${span.spanId}-${span.flags}`;
}

export function newSpanId(): string {
  return randomBytes(8).toString("hex");
}

export function newTraceId(): string {
  return randomBytes(16).toString("hex");
}

export function parseBaggage(header: string | undefined): Map<string, string> {
  const found = new Map<string, string>();
  for (const member of (header ?? "").split(",")) {
    const [pair = ""] = member.split(";", 1);
    const at = pair.indexOf("=");
    if (at <= 0) continue;
    try {
      found.set(decodeURIComponent(pair.slice(0, at).trim()), decodeURIComponent(pair.slice(at + 1).trim()));
    } catch {
      // a malformed member is dropped, as the W3C propagator drops it
    }
  }
  return found;
}

export function formatBaggage(baggage: Map<string, string>): string {
  return [...baggage].map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`).join(",");
}

/** `baggage` with the payload's `session_id` / `run_id` / `message_id` merged in (a copy). */
export function withPayloadBaggage(baggage: Map<string, string>, payload: unknown): Map<string, string> {
  const merged = new Map(baggage);
  if (payload && typeof payload === "object" && !Array.isArray(payload)) {
    const fields = payload as Record<string, unknown>;
    for (const [field, key] of Object.entries(BAGGAGE_FROM_PAYLOAD)) {
      const value = fields[field];
      if (typeof value === "string" && value) merged.set(key, value);
    }
  }
  return merged;
}

/** The headers a call made in `trace` carries (none without a span or baggage). */
export function traceHeaders(trace: TraceContext | undefined, payload: unknown): Record<string, string> {
  const headers: Record<string, string> = {};
  if (trace?.span) headers.traceparent = formatTraceparent(trace.span);
  const baggage = withPayloadBaggage(trace?.baggage ?? new Map(), payload);
  if (baggage.size) headers.baggage = formatBaggage(baggage);
  return headers;
}

/**
 * The context an invocation runs in: the caller's trace with a new span of its own, or — for a
 * hop (`hop: true`, or a call whose caller's span stands for it) — the caller's span as it is.
 */
export function invocationContext(
  functionId: string,
  headers: Record<string, string>,
  payload: unknown,
  hop: boolean,
): { trace: TraceContext; span?: { context: SpanContext; parentSpanId?: string } } {
  const parent = parseTraceparent(headers.traceparent);
  const baggage = withPayloadBaggage(parseBaggage(headers.baggage), payload);
  const byCaller = baggage.get(CALLER_SPAN_BAGGAGE);
  baggage.delete(CALLER_SPAN_BAGGAGE);
  if (hop || byCaller === functionId) {
    return { trace: parent ? { span: parent, baggage } : { baggage } };
  }
  const context: SpanContext = {
    traceId: parent?.traceId ?? newTraceId(),
    spanId: newSpanId(),
    flags: parent?.flags ?? "01",
  };
  return {
    trace: { span: context, baggage },
    span: parent ? { context, parentSpanId: parent.spanId } : { context },
  };
}
