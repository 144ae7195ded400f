/**
 * The options of a cluster instance: what each field is for, its constraint and its default,
 * checked once at construction with one message shape (`expected <name> to be …, got …`).
 *
 * @module
 * @internal
 */
import type { Redis } from 'ioredis';
import { nanoid } from 'nanoid';
import { systemClock, unrefTimer, type Clock } from '../clock.js';
import { InvalidArgumentError, type RunplaneError } from '../errors.js';
import type { SessionKey } from '../events/event-log.js';
import { checkKeyPrefix, defaultKeyPrefix } from './keys.js';

/** @internal Options of `createClusterInstance`. Times are milliseconds of `clock`. */
export interface ClusterInstanceOptions {
  /** The command connection (ioredis, without `keyPrefix`). The instance never closes it. */
  readonly redis: Redis;
  /** This instance's id, unique among live instances; non-empty. @default a fresh nanoid */
  readonly instanceId?: string;
  /** The prefix of every key; non-empty, no braces. @default 'rp:' */
  readonly keyPrefix?: string;
  /** How long a lease lives without a renew; an integer of at least 30. @default 10000 */
  readonly leaseTtlMs?: number;
  /**
   * The holder stops driving a session when no renew has succeeded by `sentAt + ttl − margin`
   * (`sentAt`: when the last successful renew was sent). An integer from 0 to a third of the
   * TTL (so the deadline falls after the next renew). @default leaseTtlMs / 5
   */
  readonly leaseMarginMs?: number;
  /**
   * A monotonic clock for the lease deadline, renews, retries and the follow poll.
   * @default `performance.now()` and the platform timers (unref'd)
   */
  readonly clock?: Clock;
  /**
   * Writes of one session not yet acknowledged by Redis, as a count and as bytes of JSON; past
   * either the session is stopped with `OUTBOX_FULL`. Positive integers.
   * @default { entries: 10000, bytes: 16777216 } (16 MiB)
   */
  readonly maxOutbox?: { readonly entries?: number; readonly bytes?: number };
  /**
   * One batch (one script call) carries at most this many writes and about this many bytes (at
   * least one write). Positive integers. @default { entries: 256, bytes: 524288 } (512 KiB)
   */
  readonly maxBatch?: { readonly entries?: number; readonly bytes?: number };
  /** A batch that failed for a transient reason is retried after min…max ms, doubling. @default { minMs: 20, maxMs: 1000 } */
  readonly retry?: { readonly minMs?: number; readonly maxMs?: number };
  /** While a session has followers, its `seq` is polled this often (a lost nudge's backstop). A positive integer. @default 1000 */
  readonly followPollMs?: number;
  /** How many Stream entries one `XRANGE` of `read`/`follow` reads. A positive integer. @default 256 */
  readonly readBatchSize?: number;
  /**
   * Called once when this instance stops holding a session on its own account: a renew was
   * refused, the local deadline passed, Redis refused a batch, or the outbox overflowed. The
   * session's outbox is stopped and its writes are refused from then on.
   */
  readonly onLost?: (key: SessionKey, error: RunplaneError) => void;
}

/** @internal The options with every default applied. */
export interface ResolvedClusterOptions {
  readonly redis: Redis;
  readonly instanceId: string;
  readonly keyPrefix: string;
  readonly leaseTtlMs: number;
  readonly leaseMarginMs: number;
  readonly renewEveryMs: number;
  readonly clock: Clock;
  readonly maxOutboxEntries: number;
  readonly maxOutboxBytes: number;
  readonly maxBatchEntries: number;
  readonly maxBatchBytes: number;
  readonly retryMinMs: number;
  readonly retryMaxMs: number;
  readonly followPollMs: number;
  readonly readBatchSize: number;
}

/** The default clock: monotonic, with timers that do not keep the process alive. */
const monotonicClock: Clock = {
  now: () => performance.now(),
  setTimeout: (fn, timeoutMs) => {
    const handle = systemClock.setTimeout(fn, timeoutMs);
    unrefTimer(handle);
    return handle;
  },
  clearTimeout: (handle) => systemClock.clearTimeout(handle),
};

/**
 * @internal `value` (or `fallback` when undefined) as an integer from `min` to `max`.
 *
 * @throws {@link InvalidArgumentError} (`INVALID_ARGUMENT`) naming `name` otherwise
 */
export const checkInteger = (
  name: string,
  value: number | undefined,
  fallback: number,
  min: number,
  max = Number.MAX_SAFE_INTEGER,
) => {
  const n = value ?? fallback;
  if (!Number.isSafeInteger(n) || n < min || n > max) {
    throw new InvalidArgumentError(
      name,
      `expected \`${name}\` to be an integer from ${min} to ${max}, got ${String(value)}`,
    );
  }
  return n;
};

/**
 * @internal Applies the defaults and checks every option.
 *
 * @throws {@link InvalidArgumentError} (`INVALID_ARGUMENT`) naming the first bad option
 */
export function resolveClusterOptions(options: ClusterInstanceOptions): ResolvedClusterOptions {
  const instanceId = options.instanceId ?? nanoid();
  if (typeof instanceId !== 'string' || instanceId.length === 0) {
    throw new InvalidArgumentError(
      'instanceId',
      `expected \`instanceId\` to be a non-empty string, got ${JSON.stringify(instanceId)}`,
    );
  }
  const leaseTtlMs = checkInteger('leaseTtlMs', options.leaseTtlMs, 10_000, 30);
  const renewEveryMs = Math.floor(leaseTtlMs / 3);
  const retryMinMs = checkInteger('retry.minMs', options.retry?.minMs, 20, 1);
  return {
    redis: options.redis,
    instanceId,
    keyPrefix: checkKeyPrefix(options.keyPrefix ?? defaultKeyPrefix),
    leaseTtlMs,
    renewEveryMs,
    leaseMarginMs: checkInteger(
      'leaseMarginMs',
      options.leaseMarginMs,
      Math.floor(leaseTtlMs / 5),
      0,
      renewEveryMs,
    ),
    clock: options.clock ?? monotonicClock,
    maxOutboxEntries: checkInteger('maxOutbox.entries', options.maxOutbox?.entries, 10_000, 1),
    maxOutboxBytes: checkInteger('maxOutbox.bytes', options.maxOutbox?.bytes, 16 * 1024 * 1024, 1),
    maxBatchEntries: checkInteger('maxBatch.entries', options.maxBatch?.entries, 256, 1),
    maxBatchBytes: checkInteger('maxBatch.bytes', options.maxBatch?.bytes, 512 * 1024, 1),
    retryMinMs,
    retryMaxMs: checkInteger('retry.maxMs', options.retry?.maxMs, 1_000, retryMinMs),
    followPollMs: checkInteger('followPollMs', options.followPollMs, 1_000, 1),
    readBatchSize: checkInteger('readBatchSize', options.readBatchSize, 256, 1),
  };
}
