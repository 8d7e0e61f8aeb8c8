/**
 * The namespace's buckets and streams, created as the Python engine creates them
 * (`NatsEngine._provision`), or — with `provision: false` — only checked for.
 */

import { nanos } from "@nats-io/transport-node";
import {
  JetStreamApiError,
  RetentionPolicy,
  StorageType,
  type JetStreamClient,
  type JetStreamManager,
  type StreamConfig,
} from "@nats-io/jetstream";
import { Kvm, type KV, type KvOptions } from "@nats-io/kv";
import { EngineError } from "./errors.js";
import type { Names } from "./naming.js";

export const NAMESPACE_SCHEMA_VERSION = 1;
const DEFAULT_PARTITIONS = 16;
const DEFAULT_HISTORY = 8;
const MAX_CONSUMERS = 10_000;
const WRONG_LAST_SEQUENCE = new Set([10071, 10164]);

export function isWrongLastSequence(error: unknown): boolean {
  return error instanceof JetStreamApiError && WRONG_LAST_SEQUENCE.has(error.code);
}

export interface Buckets {
  state: KV;
  catalog: KV;
}

async function ensureKv(kvm: Kvm, name: string, options: Partial<KvOptions>): Promise<KV> {
  try {
    return await kvm.create(name, options);
  } catch (error) {
    // Made meanwhile by another process, or made by one with other limits: use it as it is.
    if (error instanceof JetStreamApiError) return await kvm.open(name);
    throw error;
  }
}

async function ensureStream(jsm: JetStreamManager, config: Partial<StreamConfig> & { name: string }): Promise<void> {
  try {
    await jsm.streams.info(config.name);
  } catch {
    try {
      await jsm.streams.add(config);
    } catch (error) {
      if (!(error instanceof JetStreamApiError)) throw error; // 10058: another process won
    }
  }
}

export async function provision(
  js: JetStreamClient,
  jsm: JetStreamManager,
  names: Names,
  heartbeatSeconds: number,
): Promise<Buckets> {
  const kvm = new Kvm(js);
  const file = StorageType.File;
  const [state, catalog] = await Promise.all([
    ensureKv(kvm, names.stateBucket, { history: DEFAULT_HISTORY, storage: file }),
    ensureKv(kvm, names.catalogBucket, { ttl: 3 * heartbeatSeconds * 1000, storage: file }),
    ensureKv(kvm, names.metaBucket, { storage: file }),
    ensureStream(jsm, {
      name: names.queueStream,
      subjects: [`${names.ns}.q.>`],
      retention: RetentionPolicy.Workqueue,
      storage: file,
      duplicate_window: nanos(120_000),
      max_consumers: MAX_CONSUMERS,
      num_replicas: 1,
    }),
    ensureStream(jsm, {
      name: names.deadStream,
      subjects: [`${names.ns}.dead.>`],
      retention: RetentionPolicy.Limits,
      storage: file,
      allow_direct: true,
      num_replicas: 1,
    }),
  ]);
  const record = JSON.stringify({ schema_version: NAMESPACE_SCHEMA_VERSION, partitions: DEFAULT_PARTITIONS });
  try {
    await js.publish(`$KV.${names.metaBucket}.namespace`, record, { expect: { lastSubjectSequence: 0 } });
  } catch (error) {
    if (!isWrongLastSequence(error)) throw error; // written before: the first writer's record stands
  }
  return { state, catalog };
}

/** `provision: false`: the namespace must exist (a harness made it); open its buckets. */
export async function openExisting(js: JetStreamClient, jsm: JetStreamManager, names: Names): Promise<Buckets> {
  try {
    await jsm.streams.info(`KV_${names.catalogBucket}`);
    await jsm.streams.info(`KV_${names.stateBucket}`);
  } catch {
    throw new EngineError(
      "engine_unavailable",
      `namespace ${names.ns} does not exist yet: start a process allowed to create it (a harness) first;` +
        " this worker was told provision=false",
    );
  }
  const kvm = new Kvm(js);
  return { state: await kvm.open(names.stateBucket), catalog: await kvm.open(names.catalogBucket) };
}
