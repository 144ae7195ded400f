/**
 * The shipper of the fenced, ordered write-behind (docs/architecture.md, "Cluster on Redis"):
 * it takes a batch from each outbox with writes waiting and nothing in flight, sends all those
 * batches in one pipeline (one script call per batch), and acts on each answer:
 * - applied (or found already applied: a retry whose reply was lost) → acknowledged, next batch;
 * - refused (stale lease or fence, `seq` that does not follow) → the outbox stops, `onRefused`;
 * - a transient failure (connection, timeout, or Redis answering `NOSCRIPT`, `BUSY`, `LOADING`
 *   and the like: {@link isTransientReply}) → the same batch again after a backoff, so the
 *   order is kept. The lease's local deadline ends the retries of a holder cut off from Redis;
 * - any other error Redis answers (a Lua runtime error: a key of the wrong type, say) would
 *   fail the same way on every retry → the outbox stops with `STORE_FAILED` and `onRefused`
 *   is told once (the instance loses the session), never retried.
 *
 * @module
 * @internal
 */
import { RunplaneError, StaleFenceError } from '../errors.js';
import { createIdSequence } from '../ids.js';
import type { ResolvedClusterOptions } from './cluster-options.js';
import { encodeBatch, type ShippableOutbox } from './outbox.js';
import type { ClusterScripts } from './scripts.js';

/**
 * Error codes Redis answers that a retry may get past: no script cached (`NOSCRIPT`), another
 * script running (`BUSY`), a dataset loading (`LOADING`), a replica or cluster not ready
 * (`MASTERDOWN`, `READONLY`, `TRYAGAIN`, `CLUSTERDOWN`), memory over `maxmemory` (`OOM`: checked
 * before a script's first write, so nothing is written).
 */
const transientCodes = new Set([
  'NOSCRIPT',
  'BUSY',
  'LOADING',
  'MASTERDOWN',
  'READONLY',
  'TRYAGAIN',
  'CLUSTERDOWN',
  'OOM',
]);

/**
 * @internal Whether a failed script call may succeed if sent again: every failure that is not
 * an answer of Redis (the connection, a timeout), and the answers of {@link transientCodes}.
 */
export function isTransientReply(error: Error): boolean {
  if (error.name !== 'ReplyError') return true;
  return transientCodes.has(error.message.split(' ', 1)[0] ?? '');
}

/** @internal Ships outboxes; one per instance. */
export interface Shipper {
  /** An outbox has new writes: ship them soon (batched with whatever else is queued this tick). */
  schedule(outbox: ShippableOutbox): void;
  /** Stops retry timers; outboxes keep what they hold. */
  close(): void;
}

/**
 * @internal Creates the shipper of one instance.
 *
 * @param onShipped - a batch of `outbox` is in Redis, up to `seq`
 * @param onRefused - Redis refused a batch of `outbox` (the outbox is already stopped)
 */
export function createShipper(
  options: ResolvedClusterOptions,
  scripts: ClusterScripts,
  onShipped: (outbox: ShippableOutbox, seq: number) => void,
  onRefused: (outbox: ShippableOutbox, error: RunplaneError) => void,
): Shipper {
  const { redis, clock, maxBatchEntries, maxBatchBytes, retryMinMs, retryMaxMs } = options;
  const nextBatchId = createIdSequence();
  /** Outboxes to look at on the next pump. */
  const ready = new Set<ShippableOutbox>();
  /** Outboxes waiting out a backoff, with their timer. */
  const backingOff = new Map<ShippableOutbox, unknown>();
  /** Outboxes whose batch is on the wire: they take no second batch until it is answered. */
  const sending = new Set<ShippableOutbox>();
  let pumpQueued = false;
  let closed = false;

  const refuse = (outbox: ShippableOutbox, error: RunplaneError) => {
    outbox.stop(error);
    onRefused(outbox, error);
  };

  const retryLater = (outbox: ShippableOutbox) => {
    const batch = outbox.inFlight;
    if (batch === undefined || closed) return;
    const delay = Math.min(retryMaxMs, retryMinMs * 2 ** Math.min(batch.attempts - 1, 20));
    backingOff.set(
      outbox,
      clock.setTimeout(() => {
        backingOff.delete(outbox);
        schedule(outbox);
      }, delay),
    );
  };

  const settle = (outbox: ShippableOutbox, error: Error | null, reply: unknown) => {
    const batch = outbox.inFlight;
    if (outbox.stopped !== undefined || batch === undefined) return;
    const { ownerId, sessionId } = outbox.key;
    if (error !== null && !isTransientReply(error)) {
      refuse(
        outbox,
        new RunplaneError(
          'STORE_FAILED',
          `Redis failed a batch of session ${sessionId}: ${error.message}`,
          { cause: error },
        ),
      );
      return;
    }
    if (error !== null || !Array.isArray(reply)) {
      retryLater(outbox);
      return;
    }
    const [status, value] = reply as [string, number | string];
    if (status === 'ok' || (status === 'replayed' && value === batch.lastSeq)) {
      outbox.acknowledge();
      if (batch.lastSeq >= batch.firstSeq) onShipped(outbox, batch.lastSeq);
      if (outbox.pending > 0) schedule(outbox);
    } else if (status === 'stale_fence' || status === 'seq_conflict' || status === 'replayed') {
      const [reason, detail] =
        status === 'stale_fence'
          ? (['write_refused', `fence is now ${value}`] as const)
          : ([
              'seq_conflict',
              `the batch starts at seq ${batch.firstSeq}, Redis holds ${value}`,
            ] as const);
      refuse(outbox, new StaleFenceError(ownerId, sessionId, outbox.fence, reason, detail));
    } else {
      refuse(
        outbox,
        new RunplaneError(
          'STORE_FAILED',
          `Redis refused a batch of session ${sessionId}: ${String(value)}`,
        ),
      );
    }
  };

  const pump = async () => {
    pumpQueued = false;
    const round: ShippableOutbox[] = [];
    for (const outbox of ready) {
      if (outbox.stopped !== undefined || backingOff.has(outbox)) continue;
      if (outbox.inFlight === undefined && outbox.pending === 0) continue;
      round.push(outbox);
    }
    ready.clear();
    if (closed) return;
    // An outbox whose writes are all in an open group has no batch yet: closing it reschedules.
    const sent = round.filter(
      (outbox) =>
        (outbox.inFlight ?? outbox.takeBatch(nextBatchId(), maxBatchEntries, maxBatchBytes)) !==
        undefined,
    );
    if (sent.length === 0) return;
    for (const outbox of sent) sending.add(outbox);
    let results: Array<[Error | null, unknown]> | null = null;
    try {
      const pipeline = redis.pipeline();
      const calls = scripts.queue(pipeline);
      for (const outbox of sent) {
        const batch = outbox.inFlight!;
        batch.attempts++;
        const { keys, args } = encodeBatch(outbox, batch);
        calls.ship(keys, args);
      }
      results = await pipeline.exec();
    } catch {
      // The whole pipeline failed (the connection, a timeout): every batch is retried.
    }
    sent.forEach((outbox, i) => {
      sending.delete(outbox);
      const [error, reply] = results?.[i] ?? [new Error('pipeline failed'), undefined];
      settle(outbox, error, reply);
    });
  };

  const schedule = (outbox: ShippableOutbox) => {
    if (sending.has(outbox) || backingOff.has(outbox)) return;
    ready.add(outbox);
    if (pumpQueued) return;
    pumpQueued = true;
    queueMicrotask(() => void pump());
  };

  return {
    schedule,
    close() {
      closed = true;
      for (const timer of backingOff.values()) clock.clearTimeout(timer);
      backingOff.clear();
      ready.clear();
    },
  };
}
