/**
 * A per-owner request rate limit as Hono middleware: a token bucket per owner on the runtime
 * clock; a request with no token left is 429 `rate_limited` with `Retry-After`.
 *
 * @remarks Written here rather than taken from a rate-limit package because the bucket must run
 * on the injected clock (a simulated one in tests), and the owners are the configured tokens'
 * owners, so the table of buckets is as bounded as the token list.
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

interface Bucket {
  tokens: number;
  at: number;
}

/**
 * Middleware that takes one token of the caller's bucket per request (after `bearerAuth`).
 *
 * @param options - {@link RateLimitOptions}
 * @param clock - the clock the bucket refills on
 * @returns the middleware
 * @throws {@link HttpError} (`rate_limited`, 429, with `Retry-After` in seconds) when the
 *   caller's bucket is empty
 */
export function rateLimit(
  options: RateLimitOptions,
  clock: Clock,
): MiddlewareHandler<{ Variables: { ownerId: string } }> {
  const buckets = new Map<string, Bucket>();
  const perMs = options.perSecond / 1000;
  return async (c, next) => {
    const ownerId = c.get('ownerId');
    const now = clock.now();
    let bucket = buckets.get(ownerId);
    if (bucket === undefined) buckets.set(ownerId, (bucket = { tokens: options.burst, at: now }));
    bucket.tokens = Math.min(options.burst, bucket.tokens + (now - bucket.at) * perMs);
    bucket.at = now;
    if (bucket.tokens < 1) {
      c.header('Retry-After', String(Math.max(1, Math.ceil((1 - bucket.tokens) / perMs / 1000))));
      throw new HttpError(
        'rate_limited',
        `expected at most ${options.perSecond} requests per second per owner (bursts of ${options.burst}); retry later`,
      );
    }
    bucket.tokens -= 1;
    await next();
  };
}
