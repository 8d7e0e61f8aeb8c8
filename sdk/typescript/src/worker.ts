/**
 * A tackroom worker in TypeScript: serve functions, call functions, read and write state, follow
 * an event stream — on the NATS wire protocol of the Python engine (src/tackroom/engine/nats/).
 *
 *     const worker = await connect({ url: "nats://127.0.0.1:4222", namespace: "tackroom" });
 *     await worker.registerFunction("tool::hello", (p: { name: string }) => `hi ${p.name}`);
 */

import { hostname } from "node:os";
import { randomUUID } from "node:crypto";
import {
  connect as natsConnect,
  headers as natsHeaders,
  NoRespondersError,
  TimeoutError,
  type Msg,
  type NatsConnection,
  type Subscription,
} from "@nats-io/transport-node";
import { jetstream, jetstreamManager, type JetStreamClient, type JetStreamManager } from "@nats-io/jetstream";
import {
  describeFailure,
  EngineError,
  errorFromWire,
  FunctionNotFoundError,
  InvocationError,
  InvocationTimeoutError,
  RevisionConflictError,
  type WireError,
} from "./errors.js";
import { checkNamespace, DEFAULT_NAMESPACE, Names, parseEngineUrl } from "./naming.js";
import { isWrongLastSequence, openExisting, provision, type Buckets } from "./provision.js";
import { EventSubscription } from "./events.js";
import { invocationContext, traceHeaders, type FinishedSpan, type TraceContext } from "./tracing.js";

export const CALL_SCHEMA_VERSION = 1;
export const CATALOG_SCHEMA_VERSION = 1;
export const STATE_SCHEMA_VERSION = 1;
export const QUEUE_GROUP = "tackroom";
export const TIMEOUT_HEADER = "Tackroom-Timeout";
export const DEFAULT_TIMEOUT_MS = 30_000;

export type JsonSchema = Record<string, unknown>;

export interface ConnectOptions {
  /** `nats://host:port`, several hosts comma-separated, or a whole tackroom engine URL
   * (`nats://u:p@host:port?namespace=ns&provision=0&inbox_prefix=...`): its options are read. */
  url: string;
  /** Default: the URL's `namespace`, else `tackroom`. */
  namespace?: string;
  user?: string;
  pass?: string;
  /** Prefix of this client's reply subjects (a user confined to `_INBOX_<user>.>` must name it). */
  inboxPrefix?: string;
  /** Create the namespace's buckets and streams if missing (default: true, or the URL's). */
  provision?: boolean;
  /** The worker name the catalog shows for this process's functions (default `typescript`). */
  worker?: string;
  /** The worker's own version, announced in the catalog with every function (default: none). */
  version?: string;
  /** Seconds between catalog refreshes (default: the URL's `heartbeat`, else 5, as Python). */
  heartbeatSeconds?: number;
  connectTimeoutMs?: number;
  /** Called with the span of every invocation this worker served (no exporter in the SDK). */
  onSpan?: (span: FinishedSpan) => void;
}

export interface FunctionOptions {
  description?: string;
  requestSchema?: JsonSchema | null;
  responseSchema?: JsonSchema | null;
  /** The catalog's worker name for this function (default: the connection's). */
  worker?: string;
  /** Plumbing: its invocations open no span of their own (Python `hop=True`). */
  hop?: boolean;
  /** The `schema_version` of the tackroom contract this function keeps (`tackroom schema
   * export` writes it in `index.json`); announced in the catalog so `tackroom workers` and a
   * caller can see which contract version is served. */
  contractVersion?: number;
}

export interface TriggerOptions {
  timeoutMs?: number;
  /** The trace the call belongs to (a handler's `ctx.trigger` passes its own). */
  trace?: TraceContext;
}

export interface StateOptions {
  /** Compare-and-set: write only if the key is at this revision (0: absent). */
  expectedRevision?: number;
  trace?: TraceContext;
}

export interface StateEntry<T = unknown> {
  scope: string;
  key: string;
  value: T;
  revision: number;
}

/** What a handler gets beside its payload. */
export interface CallContext {
  functionId: string;
  /** Aborted at the caller's deadline (the caller has been answered `invocation_timeout`). */
  signal: AbortSignal;
  /** The caller's deadline, in `Date.now()` milliseconds. */
  deadline: number;
  /** This invocation's trace: calls made through `trigger` below are its children. */
  trace: TraceContext;
  headers: Readonly<Record<string, string>>;
  trigger<T = unknown>(functionId: string, payload?: unknown, options?: TriggerOptions): Promise<T>;
}

/** The payload type is the handler's own claim: the SDK does not validate it against the schema. */
export type Handler<Req = unknown, Res = unknown> = (payload: Req, ctx: CallContext) => Res | Promise<Res>;

export interface Registration {
  functionId: string;
  unregister(): Promise<void>;
}

interface Served {
  handler: Handler<never, unknown>;
  info: {
    function_id: string;
    worker: string;
    description: string;
    request_schema: JsonSchema | null;
    response_schema: JsonSchema | null;
    version: string;
    contract_version: number | null;
  };
  hop: boolean;
  sub: Subscription;
}

const TIMED_OUT = Symbol("timed out");

function causes(error: unknown): unknown[] {
  const chain: unknown[] = [];
  for (let e = error; e !== undefined && chain.length < 8; e = (e as { cause?: unknown } | null)?.cause) {
    chain.push(e);
  }
  return chain;
}

function seconds(ms: number): string {
  const s = ms / 1000;
  return Number.isInteger(s) ? s.toFixed(1) : String(s); // as Python's repr(float)
}

function headerRecord(msg: Msg): Record<string, string> {
  const found: Record<string, string> = {};
  for (const key of msg.headers?.keys() ?? []) found[key] = msg.headers?.get(key) ?? "";
  return found;
}

function failure(error: EngineError): { schema_version: number; ok: false; error: WireError } {
  return { schema_version: CALL_SCHEMA_VERSION, ok: false, error: error.toWire() };
}

export async function connect(options: ConnectOptions): Promise<Worker> {
  const parsed = parseEngineUrl(options.url);
  const namespace = checkNamespace(options.namespace ?? parsed.namespace ?? DEFAULT_NAMESPACE);
  const heartbeat = options.heartbeatSeconds ?? parsed.heartbeat ?? 5;
  const user = options.user ?? parsed.user;
  const pass = options.pass ?? parsed.pass;
  const inboxPrefix = options.inboxPrefix ?? parsed.inboxPrefix;
  const nc = await natsConnect({
    servers: parsed.servers,
    name: `tackroom-ts-${process.pid}`,
    ...(user !== undefined ? { user } : {}),
    ...(pass !== undefined ? { pass } : {}),
    ...(inboxPrefix !== undefined ? { inboxPrefix } : {}),
    timeout: options.connectTimeoutMs ?? (parsed.connectTimeout ?? 10) * 1000,
    maxReconnectAttempts: -1,
    reconnectTimeWait: 250,
    pingInterval: 5000,
    maxPingOut: 3,
  });
  try {
    const js = jetstream(nc);
    const jsm = await jetstreamManager(nc);
    const names = new Names(namespace);
    const buckets =
      (options.provision ?? parsed.provision ?? true)
        ? await provision(js, jsm, names, heartbeat)
        : await openExisting(js, jsm, names);
    const worker = new Worker(nc, js, jsm, names, buckets, {
      worker: options.worker ?? "typescript",
      version: options.version ?? "",
      heartbeat,
      ...(options.onSpan ? { onSpan: options.onSpan } : {}),
    });
    await worker.start();
    return worker;
  } catch (error) {
    await nc.close();
    throw error;
  }
}

export class Worker {
  /** This process's catalog key (`<ns>_catalog.<instance>`). */
  readonly instance = randomUUID().replaceAll("-", "");
  private readonly served = new Map<string, Served>();
  private readonly inflight = new Set<Promise<void>>();
  private heartbeatTimer: NodeJS.Timeout | undefined;
  private closed = false;
  private catalogWrites: Promise<unknown> = Promise.resolve();

  constructor(
    readonly nc: NatsConnection,
    readonly js: JetStreamClient,
    readonly jsm: JetStreamManager,
    readonly names: Names,
    private readonly buckets: Buckets,
    private readonly settings: {
      worker: string;
      version: string;
      heartbeat: number;
      onSpan?: (span: FinishedSpan) => void;
    },
  ) {}

  async start(): Promise<void> {
    await this.publishCatalog();
    this.heartbeatTimer = setInterval(() => void this.publishCatalog().catch(() => {}), this.settings.heartbeat * 1000);
    void (async () => {
      for await (const status of this.nc.status()) {
        if (status.type === "reconnect") await this.publishCatalog().catch(() => {});
      }
    })();
  }

  // -- the catalog ------------------------------------------------------------------------
  /** This process's catalog entry, in the shape `catalog.py` writes and reads. */
  catalogEntry(): Record<string, unknown> {
    return {
      schema_version: CATALOG_SCHEMA_VERSION,
      instance: this.instance,
      pid: process.pid,
      host: hostname(),
      heartbeat: this.settings.heartbeat,
      updated_at: Date.now() / 1000,
      functions: [...this.served.values()].map((s) => s.info),
      triggers: [],
    };
  }

  /** Put the entry now (registrations changed, a heartbeat, a reconnect); writes never overlap. */
  private publishCatalog(): Promise<void> {
    const write = this.catalogWrites.then(async () => {
      if (!this.closed) await this.buckets.catalog.put(this.instance, JSON.stringify(this.catalogEntry()));
    });
    this.catalogWrites = write.catch(() => {});
    return write;
  }

  // -- serving ----------------------------------------------------------------------------
  async registerFunction<Req = unknown, Res = unknown>(
    functionId: string,
    handler: Handler<Req, Res>,
    options: FunctionOptions = {},
  ): Promise<Registration> {
    if (this.served.has(functionId)) throw new Error(`${functionId} is served by this worker already`);
    const sub = this.nc.subscribe(this.names.functionSubject(functionId), {
      queue: QUEUE_GROUP,
      callback: (error, msg) => {
        if (error) return;
        const answering = this.answer(msg).catch(() => {});
        this.inflight.add(answering);
        void answering.finally(() => this.inflight.delete(answering));
      },
    });
    this.served.set(functionId, {
      handler: handler as Handler<never, unknown>,
      hop: options.hop ?? false,
      sub,
      info: {
        function_id: functionId,
        worker: options.worker ?? this.settings.worker,
        description: options.description ?? "",
        request_schema: options.requestSchema ?? null,
        response_schema: options.responseSchema ?? null,
        version: this.settings.version,
        contract_version: options.contractVersion ?? null,
      },
    });
    await this.nc.flush(); // the server knows the subscription before the catalog names it
    await this.publishCatalog();
    return { functionId, unregister: () => this.unregister(functionId) };
  }

  private async unregister(functionId: string): Promise<void> {
    const served = this.served.get(functionId);
    if (!served) return;
    this.served.delete(functionId);
    served.sub.unsubscribe();
    await this.nc.flush();
    await this.publishCatalog();
  }

  private async answer(msg: Msg): Promise<void> {
    if (!msg.reply) return;
    let functionId = "?";
    let reply: unknown;
    try {
      const request = JSON.parse(msg.string()) as { function_id?: unknown; payload?: unknown };
      if (request.function_id === undefined) throw new Error("the call names no function_id");
      functionId = String(request.function_id);
      const headers = headerRecord(msg);
      const timeout = Number(headers[TIMEOUT_HEADER] ?? DEFAULT_TIMEOUT_MS / 1000);
      delete headers[TIMEOUT_HEADER];
      const served = this.served.get(functionId);
      reply = served
        ? await this.invoke(functionId, served, request.payload ?? null, headers, timeout)
        : failure(new FunctionNotFoundError(functionId));
    } catch (error) {
      reply = failure(new InvocationError(functionId, "invalid_request", String(error)));
    }
    let data: string;
    try {
      data = JSON.stringify(reply);
    } catch (error) {
      data = JSON.stringify(failure(new InvocationError(functionId, "invalid_payload", `the result is not JSON: ${String(error)}`)));
    }
    if (!this.nc.isClosed()) msg.respond(data);
  }

  private async invoke(
    functionId: string,
    served: Served,
    payload: unknown,
    headers: Record<string, string>,
    timeout: number,
  ): Promise<unknown> {
    const { trace, span } = invocationContext(functionId, headers, payload, served.hop);
    const controller = new AbortController();
    const started = Date.now();
    const deadline = started + timeout * 1000;
    const ctx: CallContext = {
      functionId,
      signal: controller.signal,
      deadline,
      trace,
      headers,
      trigger: (id, p, o = {}) =>
        this.trigger(id, p, { trace, timeoutMs: Math.max(1, Math.min(o.timeoutMs ?? DEFAULT_TIMEOUT_MS, deadline - Date.now())), ...(o.trace ? { trace: o.trace } : {}) }),
    };
    let timer: NodeJS.Timeout | undefined;
    const expiry = new Promise<typeof TIMED_OUT>((resolve) => {
      timer = setTimeout(() => resolve(TIMED_OUT), timeout * 1000);
    });
    let error: string | undefined;
    try {
      const result = await Promise.race([Promise.resolve().then(() => served.handler(payload as never, ctx)), expiry]);
      if (result === TIMED_OUT) {
        controller.abort(new InvocationTimeoutError(functionId, timeout));
        error = "InvocationTimeout";
        return failure(new InvocationTimeoutError(functionId, timeout));
      }
      return { schema_version: CALL_SCHEMA_VERSION, ok: true, result: result === undefined ? null : result };
    } catch (thrown) {
      const [code, message] = describeFailure(thrown);
      error = thrown instanceof Error ? thrown.name : "Error";
      return failure(new InvocationError(functionId, code, message));
    } finally {
      clearTimeout(timer);
      if (span && this.settings.onSpan) {
        const attributes: Record<string, string> = { "tackroom.function_id": functionId, "tackroom.invocation.kind": "trigger" };
        for (const key of ["session.id", "run.id", "message.id"]) {
          const value = trace.baggage.get(key);
          if (value) attributes[key] = value;
        }
        this.settings.onSpan({
          name: `trigger ${functionId}`,
          kind: "server",
          traceId: span.context.traceId,
          spanId: span.context.spanId,
          ...(span.parentSpanId ? { parentSpanId: span.parentSpanId } : {}),
          startTimeMs: started,
          endTimeMs: Date.now(),
          status: error ? "error" : "ok",
          ...(error ? { error } : {}),
          attributes,
        });
      }
    }
  }

  // -- calling ----------------------------------------------------------------------------
  /** Call a function by id, wherever it is served; its result, or a typed error. */
  async trigger<T = unknown>(functionId: string, payload: unknown = null, options: TriggerOptions = {}): Promise<T> {
    const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    const headers = natsHeaders();
    headers.set(TIMEOUT_HEADER, seconds(timeoutMs));
    for (const [key, value] of Object.entries(traceHeaders(options.trace, payload))) headers.set(key, value);
    const data = JSON.stringify({ schema_version: CALL_SCHEMA_VERSION, function_id: functionId, payload: payload ?? null });
    let msg: Msg;
    try {
      msg = await this.nc.request(this.names.functionSubject(functionId), data, { timeout: timeoutMs, headers });
    } catch (error) {
      const chain = causes(error);
      if (chain.some((e) => e instanceof NoRespondersError)) throw new FunctionNotFoundError(functionId);
      if (chain.some((e) => e instanceof TimeoutError)) throw new InvocationTimeoutError(functionId, timeoutMs / 1000);
      throw new EngineError("engine_unavailable", `NATS: ${error instanceof Error ? error.message : String(error)}`);
    }
    const reply = msg.json<{ ok?: boolean; result?: T; error?: WireError }>();
    if (reply.ok) return reply.result as T;
    throw errorFromWire(reply.error ?? {});
  }

  // -- state ------------------------------------------------------------------------------
  private async current(scope: string, key: string): Promise<{ seq: number; present: boolean; value: unknown }> {
    const entry = await this.buckets.state.get(this.names.stateKey(scope, key));
    if (!entry) return { seq: 0, present: false, value: null };
    const present = entry.operation === "PUT";
    const value = present ? entry.json<{ value: unknown }>().value : null;
    return { seq: entry.revision, present, value };
  }

  async getState<T = unknown>(scope: string, key: string): Promise<StateEntry<T> | null> {
    const known = await this.current(scope, key);
    return known.present ? { scope, key, value: known.value as T, revision: known.seq } : null;
  }

  /** Write a value; with `expectedRevision`, only over that revision (else `RevisionConflictError`). */
  async setState<T = unknown>(scope: string, key: string, value: T, options: StateOptions = {}): Promise<StateEntry<T>> {
    const seq = await this.write(scope, key, value ?? null, "set", options);
    return { scope, key, value, revision: seq };
  }

  /** Delete a value; false if it was absent. */
  async deleteState(scope: string, key: string, options: StateOptions = {}): Promise<boolean> {
    return (await this.write(scope, key, null, "delete", options)) > 0;
  }

  /** A compare-and-set on the key's last sequence, retried on a lost race (as `state.py`). */
  private async write(scope: string, key: string, value: unknown, event: "set" | "delete", options: StateOptions): Promise<number> {
    const subject = this.names.stateSubject(scope, key);
    for (;;) {
      const known = await this.current(scope, key);
      const revision = known.present ? known.seq : 0;
      if (options.expectedRevision !== undefined && revision !== options.expectedRevision) {
        throw new RevisionConflictError(scope, key, options.expectedRevision, revision);
      }
      if (event === "delete" && !known.present) return 0;
      const headers = natsHeaders();
      headers.set("Tackroom-Schema-Version", "1");
      headers.set("Tackroom-Event", event);
      if (event === "delete") headers.set("KV-Operation", "DEL");
      for (const [k, v] of Object.entries(traceHeaders(options.trace, undefined))) headers.set(k, v);
      const body = JSON.stringify({ schema_version: STATE_SCHEMA_VERSION, value, old_value: known.value });
      try {
        const ack = await this.js.publish(subject, body, { headers, expect: { lastSubjectSequence: known.seq } });
        return ack.seq;
      } catch (error) {
        if (!isWrongLastSequence(error)) throw error;
        await new Promise((resolve) => setTimeout(resolve, Math.random() * 2));
      }
    }
  }

  // -- event streams ----------------------------------------------------------------------
  /** The records of a stream group after `after`, stored ones first, then new ones as they come. */
  async subscribe(stream: string, group: string, options: { after?: number } = {}): Promise<EventSubscription> {
    return EventSubscription.open(this.js, this.jsm, this.names, stream, group, options.after ?? 0);
  }

  // -- lifecycle --------------------------------------------------------------------------
  /** Stop serving, answer the calls in flight, withdraw the catalog entry, disconnect. */
  async close(): Promise<void> {
    if (this.closed) return;
    clearInterval(this.heartbeatTimer);
    for (const served of this.served.values()) served.sub.unsubscribe();
    this.served.clear();
    await Promise.allSettled([...this.inflight]);
    await this.catalogWrites;
    this.closed = true;
    try {
      await this.buckets.catalog.purge(this.instance);
    } catch {
      // unreachable: the entry expires by itself within three heartbeats
    }
    await this.nc.close();
  }
}
