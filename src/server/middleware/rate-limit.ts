/**
 * A per-owner request rate limit as Hono middleware: a token bucket per owner on the runtime
 * clock; a request with no token left is 429 `rate_limited` with `Retry-After`.
 *
 * @remarks Written here rather than taken from a rate-limit package because the bucket must run
 * on the injected clock (a simulated one in tests). An application's `authenticate` may admit
 * any number of owners, so the table of buckets is swept whenever it doubles (from
 * {@link minSweepSize} entries): a bucket that has refilled to `burst` is dropped, since a new
 * bucket would be the same. The table thus holds at most about twice the owners that sent a
 * request within one refill time (`burst / perSecond` seconds), whatever clients send.
 *
 * @module
 */
import type { MiddlewareHandler } from 'hono';
import type { Clock } from '../../clock.js';
import { HttpError } from '../http-error.js';

/** Options of {@link rateLimit}. */
export interface RateLimitOptions {
  /** Requests per second each owner may sustain (tokens refilled per second). */
  readonly perSecond: number;
  /** Requests one owner may send at once after a quiet spell (the bucket's size). */
  readonly burst: number;
}

/** @internal The table size below which it is never swept. */
export const minSweepSize = 1024;

interface Bucket {
  tokens: number;
  at: number;
}

/** @internal The owners' buckets: {@link rateLimit}'s state, apart for its tests. */
export interface BucketTable {
  /**
   * Takes one token of `ownerId`'s bucket at `now` (ms).
   *
   * @returns 0 when a token was taken, else the ms until the next one
   */
  take(ownerId: string, now: number): number;
  /** The buckets held. */
  readonly size: number;
}

/** @internal Creates an empty {@link BucketTable}. */
export function createBucketTable(options: RateLimitOptions): BucketTable {
  const buckets = new Map<string, Bucket>();
  const perMs = options.perSecond / 1000;
  let sweepAt = minSweepSize;
  /** Drops the buckets that are full again (each as good as a new one). */
  const sweep = (now: number) => {
    for (const [ownerId, bucket] of buckets) {
      if (bucket.tokens + (now - bucket.at) * perMs >= options.burst) buckets.delete(ownerId);
    }
    sweepAt = Math.max(minSweepSize, buckets.size * 2);
  };
  return {
    take(ownerId, now) {
      let bucket = buckets.get(ownerId);
      if (bucket === undefined) {
        if (buckets.size >= sweepAt) sweep(now);
        buckets.set(ownerId, (bucket = { tokens: options.burst, at: now }));
      }
      bucket.tokens = Math.min(options.burst, bucket.tokens + (now - bucket.at) * perMs);
      bucket.at = now;
      if (bucket.tokens < 1) return (1 - bucket.tokens) / perMs;
      bucket.tokens -= 1;
      return 0;
    },
    get size() {
      return buckets.size;
    },
  };
}

/**
 * Middleware that takes one token of the caller's bucket per request (after `bearerAuth`).
 *
 * @param options - {@link RateLimitOptions}
 * @param clock - the clock the bucket refills on
 * @param buckets - the buckets to take from instead of this process's own (a cluster's)
 * @returns the middleware
 * @throws {@link HttpError} (`rate_limited`, 429, with `Retry-After` in seconds) when the
 *   caller's bucket is empty
 */
/** Buckets kept elsewhere (a cluster's, in Redis): `take` answers the ms to wait, 0 when a token was taken. */
export interface SharedBuckets {
  take(ownerId: string): Promise<number>;
}

export function rateLimit(
  options: RateLimitOptions,
  clock: Clock,
  buckets?: SharedBuckets,
): MiddlewareHandler<{ Variables: { ownerId: string } }> {
  const table = buckets === undefined ? createBucketTable(options) : undefined;
  return async (c, next) => {
    const ownerId = c.get('ownerId');
    const waitMs = table?.take(ownerId, clock.now()) ?? (await buckets!.take(ownerId));
    if (waitMs > 0) {
      c.header('Retry-After', String(Math.max(1, Math.ceil(waitMs / 1000))));
      throw new HttpError(
        'rate_limited',
        `expected at most ${options.perSecond} requests per second per owner (bursts of ${options.burst}); retry later`,
      );
    }
    await next();
  };
}
