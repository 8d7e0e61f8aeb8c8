import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { randomBytes } from "node:crypto";
import { connect as natsConnect } from "@nats-io/transport-node";
import { jetstreamManager, jetstream } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import {
  connect,
  decodeToken,
  encodeToken,
  EngineError,
  FunctionError,
  FunctionNotFoundError,
  InvocationError,
  InvocationTimeoutError,
  parseEngineUrl,
  parseTraceparent,
  RevisionConflictError,
  type CallContext,
  type FinishedSpan,
  type Worker,
} from "../src/index.js";
import { startNatsServer, type TestServer } from "./server.js";

let server: TestServer;
const open: Worker[] = [];

before(async () => {
  server = await startNatsServer();
});
after(async () => {
  await Promise.allSettled(open.map((w) => w.close()));
  await server.stop();
});

function namespace(): string {
  return `ts${randomBytes(5).toString("hex")}`;
}

async function worker(ns: string, options: Partial<Parameters<typeof connect>[0]> = {}): Promise<Worker> {
  const w = await connect({ url: server.url, namespace: ns, heartbeatSeconds: 1, ...options });
  open.push(w);
  return w;
}

describe("names", () => {
  test("tokens are encoded as the Python engine encodes them", () => {
    assert.equal(encodeToken("tool::ts_weather"), "tool=3A=3Ats_weather");
    assert.equal(encodeToken("plain-name_1"), "plain-name_1");
    assert.equal(encodeToken(""), "=");
    assert.equal(encodeToken("a.b é"), "a=2Eb=20=C3=A9");
    for (const text of ["", "tool::x", "a.b é", "=3A"]) assert.equal(decodeToken(encodeToken(text)), text);
  });

  test("an engine URL gives servers, credentials and options", () => {
    const parsed = parseEngineUrl("nats://u:p%40ss@h1:4333,h2?namespace=ns1&provision=0&inbox_prefix=_INBOX_u&partitions=4");
    assert.deepEqual(parsed.servers, ["nats://h1:4333", "nats://h2:4222"]);
    assert.equal(parsed.user, "u");
    assert.equal(parsed.pass, "p@ss");
    assert.equal(parsed.namespace, "ns1");
    assert.equal(parsed.provision, false);
    assert.equal(parsed.inboxPrefix, "_INBOX_u");
  });
});

describe("functions", () => {
  test("a function served by one worker answers another, and is in the catalog", async () => {
    const ns = namespace();
    const serving = await worker(ns, { worker: "ts-test", version: "1.2.3" });
    const calling = await worker(ns);
    const schema = { type: "object", properties: { n: { type: "integer" } } };
    const registration = await serving.registerFunction<{ n: number }>("math::double", ({ n }) => n * 2, {
      description: "Double n.",
      requestSchema: schema,
      contractVersion: 2,
    });
    await serving.registerFunction("math::zero", () => 0);
    assert.equal(await calling.trigger("math::double", { n: 21 }), 42);

    const kv = await new Kvm(calling.js).open(`${ns}_catalog`);
    const entry = (await kv.get(serving.instance))!.json<Record<string, unknown>>();
    assert.equal(entry.schema_version, 1);
    assert.equal(entry.pid, process.pid);
    assert.equal(entry.heartbeat, 1);
    assert.deepEqual(entry.functions, [
      {
        function_id: "math::double",
        worker: "ts-test",
        description: "Double n.",
        request_schema: schema,
        response_schema: null,
        version: "1.2.3",
        contract_version: 2,
      },
      {
        function_id: "math::zero",
        worker: "ts-test",
        description: "",
        request_schema: null,
        response_schema: null,
        version: "1.2.3",
        contract_version: null, // keeps no tackroom contract
      },
    ]);
    const unversioned = await worker(ns);
    await unversioned.registerFunction("math::one", () => 1);
    const plain = (await kv.get(unversioned.instance))!.json<{ functions: Array<Record<string, unknown>> }>();
    assert.deepEqual([plain.functions[0]?.version, plain.functions[0]?.contract_version], ["", null]);

    await registration.unregister();
    await assert.rejects(calling.trigger("math::double", { n: 1 }), FunctionNotFoundError);
    assert.deepEqual(
      (await kv.get(serving.instance))!.json<{ functions: Array<{ function_id: string }> }>().functions.map((f) => f.function_id),
      ["math::zero"],
    );
    await serving.close();
    const gone = await kv.get(serving.instance);
    assert.ok(gone === null || gone.operation !== "PUT", "a closed worker withdraws its catalog entry");
  });

  test("the catalog entry is refreshed every heartbeat", async () => {
    const w = await worker(namespace());
    const kv = await new Kvm(w.js).open(`${w.names.ns}_catalog`);
    const first = (await kv.get(w.instance))!;
    await new Promise((r) => setTimeout(r, 1300));
    const later = (await kv.get(w.instance))!;
    assert.ok(later.revision > first.revision);
    assert.ok(later.json<{ updated_at: number }>().updated_at > first.json<{ updated_at: number }>().updated_at);
  });

  test("failures come back typed", async () => {
    const w = await worker(namespace());
    await w.registerFunction("t::coded", () => {
      throw new FunctionError("not_today", "come back tomorrow");
    });
    await w.registerFunction("t::broken", () => {
      throw new TypeError("oops");
    });
    let aborted = false;
    await w.registerFunction("t::slow", async (_p, ctx: CallContext) => {
      ctx.signal.addEventListener("abort", () => (aborted = true));
      await new Promise((r) => setTimeout(r, 2000));
    });
    const other = await worker(w.names.ns);

    await assert.rejects(other.trigger("t::missing"), (e: unknown) => e instanceof FunctionNotFoundError && e.code === "function_not_found");
    await assert.rejects(other.trigger("t::coded"), (e: unknown) => {
      assert.ok(e instanceof InvocationError);
      assert.equal(e.remoteCode, "not_today");
      assert.equal(e.message, "come back tomorrow");
      assert.equal(e.functionId, "t::coded");
      return true;
    });
    await assert.rejects(other.trigger("t::broken"), (e: unknown) => e instanceof InvocationError && e.remoteCode === "internal" && e.message === "TypeError: oops");
    await assert.rejects(other.trigger("t::slow", null, { timeoutMs: 300 }), InvocationTimeoutError);
    await new Promise((r) => setTimeout(r, 100));
    assert.ok(aborted, "the handler's signal is aborted at the caller's deadline");
  });
});

describe("state", () => {
  test("set, get, compare-and-set, delete, stored as the Python engine stores them", async () => {
    const w = await worker(namespace());
    assert.equal(await w.getState("sc", "k:1"), null);
    await assert.rejects(w.setState("sc", "k:1", 1, { expectedRevision: 5 }), RevisionConflictError);
    const first = await w.setState("sc", "k:1", { n: 1 }, { expectedRevision: 0 });
    assert.ok(first.revision > 0);
    const second = await w.setState("sc", "k:1", { n: 2 }, { expectedRevision: first.revision });
    assert.ok(second.revision > first.revision);
    await assert.rejects(w.setState("sc", "k:1", { n: 3 }, { expectedRevision: first.revision }), (e: unknown) => {
      assert.ok(e instanceof RevisionConflictError);
      assert.equal(e.actual, second.revision);
      return true;
    });
    assert.deepEqual(await w.getState("sc", "k:1"), { scope: "sc", key: "k:1", value: { n: 2 }, revision: second.revision });

    const kv = await new Kvm(w.js).open(`${w.names.ns}_state`);
    const raw = (await kv.get("sc.k=3A1"))!;
    assert.deepEqual(raw.json(), { schema_version: 1, value: { n: 2 }, old_value: { n: 1 } });

    assert.equal(await w.deleteState("sc", "k:1"), true);
    assert.equal(await w.getState("sc", "k:1"), null);
    assert.equal(await w.deleteState("sc", "k:1"), false);
    await w.setState("sc", "k:1", "again", { expectedRevision: 0 });
  });
});

describe("tracing", () => {
  test("an incoming traceparent is continued, and nested calls are its children", async () => {
    const spans: FinishedSpan[] = [];
    const w = await worker(namespace(), { onSpan: (s) => spans.push(s) });
    const seen: Record<string, CallContext> = {};
    await w.registerFunction("t::inner", (_p, ctx) => {
      seen.inner = ctx;
      return "in";
    });
    await w.registerFunction("t::outer", async (_p, ctx) => {
      seen.outer = ctx;
      return ctx.trigger("t::inner", { session_id: "s-1" });
    });
    const caller = await worker(w.names.ns);
    const traceId = randomBytes(16).toString("hex");
    const parentSpan = randomBytes(8).toString("hex");
    const trace = { span: { traceId, spanId: parentSpan, flags: "01" }, baggage: new Map([["run.id", "r-9"]]) };
    assert.equal(await caller.trigger("t::outer", {}, { trace }), "in");

    const outer = seen.outer!.trace.span!;
    assert.equal(outer.traceId, traceId);
    assert.notEqual(outer.spanId, parentSpan);
    assert.equal(parseTraceparent(seen.outer!.headers.traceparent)!.spanId, parentSpan);
    assert.equal(parseTraceparent(seen.inner!.headers.traceparent)!.spanId, outer.spanId);
    assert.equal(seen.inner!.trace.baggage.get("session.id"), "s-1");
    assert.equal(seen.inner!.trace.baggage.get("run.id"), "r-9");

    const byName = Object.fromEntries(spans.map((s) => [s.name, s]));
    assert.equal(byName["trigger t::outer"]!.parentSpanId, parentSpan);
    assert.equal(byName["trigger t::inner"]!.parentSpanId, outer.spanId);
    assert.equal(byName["trigger t::inner"]!.attributes["session.id"], "s-1");
  });

  test("a hop, or a call its caller's span stands for, opens no span", async () => {
    const spans: FinishedSpan[] = [];
    const w = await worker(namespace(), { onSpan: (s) => spans.push(s) });
    let seen: CallContext | undefined;
    await w.registerFunction("t::tool", (_p, ctx) => {
      seen = ctx;
    });
    const parent = { traceId: randomBytes(16).toString("hex"), spanId: randomBytes(8).toString("hex"), flags: "01" };
    const baggage = new Map([["tackroom.span.by_caller", "t::tool"]]);
    await w.trigger("t::tool", {}, { trace: { span: parent, baggage } });
    assert.deepEqual(seen!.trace.span, parent);
    assert.equal(seen!.trace.baggage.has("tackroom.span.by_caller"), false);
    assert.equal(spans.length, 0);
  });
});

describe("event streams", () => {
  test("a group's records after a cursor, stored then new", async () => {
    const w = await worker(namespace());
    const ns = w.names.ns;
    // A stream as streams.py makes it (its name is a hash the SDK never needs: found by subject).
    const jsm = await jetstreamManager(w.nc);
    await jsm.streams.add({ name: `${ns}_ev_0123456789abcdef`, subjects: [`${ns}.ev.${encodeToken("agent::events")}.*`] });
    const js = jetstream(w.nc);
    const subject = w.names.eventSubject("agent::events", "s-1");
    const record = (seq: number) => JSON.stringify({ schema_version: 1, seq, data: { n: seq }, ts: Date.now() / 1000 });
    await js.publish(subject, record(1));
    await js.publish(subject, record(2));
    await js.publish(w.names.eventSubject("agent::events", "other"), record(1));

    const subscription = await w.subscribe("agent::events", "s-1", { after: 1 });
    const got: number[] = [];
    setTimeout(() => void js.publish(subject, record(3)), 200);
    for await (const r of subscription) {
      got.push(r.seq);
      assert.deepEqual(r.data, { n: r.seq });
      if (r.seq === 3) break;
    }
    subscription.close();
    assert.deepEqual(got, [2, 3]);
    await assert.rejects(w.subscribe("nothing", "g"), (e: unknown) => e instanceof EngineError && e.code === "stream_not_found");
  });
});

describe("provisioning", () => {
  test("provision: false needs an existing namespace", async () => {
    await assert.rejects(connect({ url: `${server.url}?namespace=${namespace()}&provision=0` }), /does not exist yet/);
    const ns = namespace();
    await worker(ns);
    const late = await worker(ns, { provision: false });
    assert.equal(late.names.ns, ns);
  });

  test("the namespace record is written as Python writes it", async () => {
    const w = await worker(namespace());
    const nc = await natsConnect({ servers: server.url });
    const kv = await new Kvm(nc).open(`${w.names.ns}_meta`);
    assert.deepEqual((await kv.get("namespace"))!.json(), { schema_version: 1, partitions: 16 });
    await nc.close();
  });
});
