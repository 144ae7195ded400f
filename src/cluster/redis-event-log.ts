/**
 * The event log of a cluster (docs/architecture.md, "Cluster on Redis"): a Redis Stream per
 * session, entry id `<seq>-0`, written only by the session's lease holder through its outbox.
 *
 * - `append` is synchronous on the holder: its mirror numbers the event and queues it; the
 *   shipper sends it in a fenced batch. `lastSeq` and `hasRun` answer from the mirror (loaded
 *   when the lease was taken), so they too work only where the session is held.
 * - `read` and `follow` read the Stream, on any instance: an event is visible only once Redis
 *   holds it. On the holder, `read` first waits for the writes it has queued (read your writes).
 *   `follow` sleeps until a tail nudge (one subscriber connection per instance) or the poll says
 *   the Stream grew.
 *
 * @module
 * @internal
 */
import type { Redis } from 'ioredis';
import { StaleFenceError } from '../errors.js';
import type { EventLog, ReadOptions, RunplaneEvent, SessionKey } from '../events/event-log.js';
import { matchesReadOptions, toPayloadJson, toStoredEvent } from '../events/stored-event.js';
import { createIdSequence } from '../ids.js';
import type { ResolvedClusterOptions } from './cluster-options.js';
import { toSessionKeys } from './keys.js';
import type { ShippableOutbox } from './outbox.js';
import type { TailWatcher } from './tail-watcher.js';

/** @internal What the holder keeps of a session: counters and its outbox, not the log. */
export interface SessionMirror {
  readonly key: SessionKey;
  readonly outbox: ShippableOutbox;
  lastSeq: number;
  /** Every run that logged in the session (`hasRun`). */
  readonly runIds: Set<string>;
}

/** An `XRANGE` reply: `[id, [field, value, …]]` per entry. */
type StreamEntries = Array<[string, string[]]>;

const toEvent = ([, fields]: [string, string[]]): RunplaneEvent => {
  const json = fields[fields.indexOf('e') + 1] ?? '{}';
  return JSON.parse(json) as RunplaneEvent;
};

/**
 * @internal The JSON of a stored event, as the Stream holds it; a payload JSON cannot hold is
 * stored as a note (`{ unserializable }`), never lost.
 */
const toEventJson = (event: RunplaneEvent): string =>
  `{"seq":${event.seq},"id":${JSON.stringify(event.id)},"sessionId":${JSON.stringify(event.sessionId)}` +
  (event.runId === undefined ? '' : `,"runId":${JSON.stringify(event.runId)}`) +
  `,"type":${JSON.stringify(event.type)},"payload":${toPayloadJson(event.payload)},"at":${JSON.stringify(event.at)}}`;

/**
 * @internal Creates the event log of an instance.
 *
 * @param mirrorOf - the mirror of a session this instance holds, if it holds it
 */
export function createRedisEventLog(
  options: ResolvedClusterOptions,
  watcher: TailWatcher,
  mirrorOf: (key: SessionKey) => SessionMirror | undefined,
): EventLog {
  const { keyPrefix, readBatchSize } = options;
  const redis: Redis = options.redis;
  const nextEventId = createIdSequence();

  const held = (key: SessionKey): SessionMirror => {
    const mirror = mirrorOf(key);
    if (mirror === undefined) {
      throw new StaleFenceError(key.ownerId, key.sessionId, 0, 'not_held');
    }
    return mirror;
  };

  /** One page of the Stream after `after` (exclusive), all types. */
  const page = async (stream: string, after: number, count: number): Promise<RunplaneEvent[]> => {
    const entries = (await redis.xrange(
      stream,
      `(${after}-0`,
      '+',
      'COUNT',
      count,
    )) as StreamEntries;
    return entries.map(toEvent);
  };

  return {
    append(_ctx, key, event) {
      const mirror = held(key);
      const stored = toStoredEvent(key, mirror.lastSeq + 1, nextEventId(), event);
      mirror.outbox.enqueueEvent(stored.seq, toEventJson(stored), stored.runId);
      mirror.lastSeq = stored.seq;
      if (stored.runId !== undefined) mirror.runIds.add(stored.runId);
      return stored;
    },

    async read(_ctx, key, options: ReadOptions = {}) {
      await mirrorOf(key)
        ?.outbox.flushed()
        .catch(() => undefined);
      const stream = toSessionKeys(key, keyPrefix).events;
      const limit = options.limit ?? Number.POSITIVE_INFINITY;
      const out: RunplaneEvent[] = [];
      let after = options.after ?? 0;
      while (out.length < limit) {
        const events = await page(stream, after, readBatchSize);
        for (const event of events) {
          if (matchesReadOptions(event, options)) out.push(event);
          if (out.length >= limit) break;
        }
        if (events.length < readBatchSize) break;
        after = events[events.length - 1]!.seq;
      }
      return out;
    },

    async *follow(ctx, key, options: ReadOptions = {}) {
      const signal = ctx.signal;
      const keys = toSessionKeys(key, keyPrefix);
      const watch = watcher.watch(keys);
      try {
        await watch.ready;
        let after = options.after ?? 0;
        while (signal?.aborted !== true) {
          const seen = watch.version;
          const events = await page(keys.events, after, readBatchSize);
          for (const event of events) {
            after = event.seq;
            if (!matchesReadOptions(event, options)) continue;
            yield event;
            if (signal?.aborted) return;
          }
          if (events.length === 0) await watch.changed(seen, signal);
        }
      } finally {
        watch.release();
      }
    },

    hasRun: (_ctx, key, runId) => held(key).runIds.has(runId),

    lastSeq: (_ctx, key) => held(key).lastSeq,
  };
}
