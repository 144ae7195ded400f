/**
 * The {@link StoreHealth} of a cluster instance's Redis (README "Cluster"): which errors mean
 * "Redis cannot be reached now", and a bounded `PING` for `GET /healthz`. The connection
 * reconnects by itself (ioredis), so the instance recovers with Redis.
 *
 * @module
 * @internal
 */
import type { Redis } from 'ioredis';
import type { Clock } from '../clock.js';
import type { StoreHealth } from '../server/store-health.js';

/** Socket error codes of a connection that cannot reach its peer. */
const unreachableCodes = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
]);

/** Error replies of a Redis that is up but cannot serve yet (loading, failing over). */
const notReadyReplies = new Set(['LOADING', 'MASTERDOWN', 'CLUSTERDOWN', 'TRYAGAIN']);

/** Messages ioredis gives a command it could not send or lost with its connection. */
const lostConnection = [
  'Connection is closed.',
  "Stream isn't writeable",
  'Command timed out',
  'Reached the max retries per request limit',
];

/** @internal Whether `error` alone (not its causes) says Redis cannot be reached. */
function isUnreachable(error: Error): boolean {
  if (error.name === 'MaxRetriesPerRequestError') return true;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string' && unreachableCodes.has(code)) return true;
  if (error.name === 'ReplyError') {
    return notReadyReplies.has(error.message.split(' ', 1)[0] ?? '');
  }
  return lostConnection.some((text) => error.message.startsWith(text));
}

/** @internal Whether `error`, or one in its `cause` chain (at most 8 deep), says Redis is unreachable. */
export function isRedisUnavailable(error: unknown): boolean {
  let at: unknown = error;
  for (let depth = 0; depth < 8 && at instanceof Error; depth++) {
    if (isUnreachable(at)) return true;
    at = at.cause;
  }
  return false;
}

/**
 * @internal The health of `redis` as the service answers it.
 *
 * @param clock - bounds the probe
 * @param probeTimeoutMs - how long `check` waits for a `PING` before it calls Redis unreachable
 */
export function createRedisHealth(redis: Redis, clock: Clock, probeTimeoutMs = 1_000): StoreHealth {
  return {
    isUnavailable: isRedisUnavailable,
    async check() {
      if (redis.status !== 'ready') return `the Redis connection is ${redis.status}`;
      let timer: unknown;
      const timedOut = new Promise<string>((resolve) => {
        timer = clock.setTimeout(
          () => resolve(`Redis did not answer a PING within ${probeTimeoutMs} ms`),
          probeTimeoutMs,
        );
      });
      const answered = redis.ping().then(
        () => undefined,
        (error: unknown) => `Redis refused a PING: ${(error as Error).message}`,
      );
      try {
        return await Promise.race([answered, timedOut]);
      } finally {
        clock.clearTimeout(timer);
      }
    },
  };
}
