/**
 * Following a group of an event stream (`streams.py`): records are
 * `{"schema_version": 1, "seq", "data", "ts"}` on `<ns>.ev.<stream>.<group>`, in a JetStream
 * stream the Python engine names by a hash of the stream's name. This module finds that stream
 * by subject (the JetStream API lists the stream that holds a subject), so it needs no hash, and
 * reads it with an ordered consumer filtered on the group: stored records, then new ones.
 *
 * Not covered: live frames (token deltas on `<ns>.live.…`, never stored) and snapshots; a cursor
 * is found by reading the group from its start and skipping (Python binary-searches).
 */

import type { ConsumerMessages, JetStreamClient, JetStreamManager } from "@nats-io/jetstream";
import { EngineError } from "./errors.js";
import type { Names } from "./naming.js";

export interface StreamRecord<T = unknown> {
  stream: string;
  group: string;
  seq: number;
  data: T;
  ts: number;
}

export class EventSubscription implements AsyncIterable<StreamRecord> {
  private constructor(
    private readonly messages: ConsumerMessages,
    readonly stream: string,
    readonly group: string,
    private after: number,
  ) {}

  static async open(
    js: JetStreamClient,
    jsm: JetStreamManager,
    names: Names,
    stream: string,
    group: string,
    after: number,
  ): Promise<EventSubscription> {
    const subject = names.eventSubject(stream, group);
    let name: string;
    try {
      name = await jsm.streams.find(subject);
    } catch {
      throw new EngineError("stream_not_found", `no JetStream stream holds ${stream}/${group} yet (nothing appended to it)`);
    }
    const consumer = await js.consumers.get(name, { filter_subjects: [subject] });
    return new EventSubscription(await consumer.consume(), stream, group, after);
  }

  async *[Symbol.asyncIterator](): AsyncIterator<StreamRecord> {
    for await (const msg of this.messages) {
      const body = msg.json<{ seq: number; data: unknown; ts: number }>();
      if (body.seq <= this.after) continue;
      this.after = body.seq;
      yield { stream: this.stream, group: this.group, seq: body.seq, data: body.data, ts: body.ts };
    }
  }

  close(): void {
    this.messages.stop();
  }
}
