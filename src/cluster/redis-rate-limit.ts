/**
 * The per-owner request rate limit of a cluster (docs/architecture.md, "Cluster on Redis",
 * §9a): the token bucket of `server/middleware/rate-limit.ts`, held in Redis in the owner's
 * hash tag and taken by one script, so an owner's rate is one budget across every instance
 * rather than one per instance.
 *
 * The bucket refills on Redis's own clock (`TIME` inside the script): the instances' clocks are
 * monotonic and local, so none of them could date a bucket the others share. A bucket that has
 * refilled to `burst` is as good as a new one, so its key expires then (bounded memory, like
 * the sweep of the in-process table).
 *
 * @module
 * @internal
 */
import type { Redis } from 'ioredis';
import { InvalidArgumentError } from '../errors.js';
import type { RateLimitOptions } from '../server/middleware/rate-limit.js';
import { toOwnerKeys } from './owner-keys.js';

/**
 * KEYS: the bucket. ARGV: burst, tokens per ms, ms from empty to full. Returns 0 when a token
 * was taken, else the ms until the next one.
 */
const takeLua = `
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local burst = tonumber(ARGV[1])
local perMs = tonumber(ARGV[2])
local stored = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(stored[1]) or burst
local at = tonumber(stored[2]) or now
tokens = math.min(burst, tokens + math.max(0, now - at) * perMs)
local wait = 0
if tokens < 1 then wait = math.ceil((1 - tokens) / perMs) else tokens = tokens - 1 end
redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', tokens), 'at', string.format('%.0f', now))
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return wait
`;

const scriptName = 'runplaneRateTake';
type ScriptCall = (...args: Array<string | number>) => Promise<unknown>;

/** @internal The owners' buckets of a cluster. */
export interface ClusterRateBuckets {
  /**
   * Takes one token of `ownerId`'s bucket.
   *
   * @returns 0 when a token was taken, else the ms until the next one
   */
  take(ownerId: string): Promise<number>;
}

/**
 * @internal Creates the cluster's per-owner buckets on `redis` under `keyPrefix`.
 *
 * @throws {@link InvalidArgumentError} (`INVALID_ARGUMENT`) for a `perSecond` that is not a
 *   positive finite number or a `burst` that is not a positive integer
 */
export function createRedisRateBuckets(
  options: RateLimitOptions & { readonly redis: Redis; readonly keyPrefix: string },
): ClusterRateBuckets {
  const { redis, keyPrefix, perSecond, burst } = options;
  if (!(Number.isFinite(perSecond) && perSecond > 0)) {
    throw new InvalidArgumentError(
      'perSecond',
      `expected \`perSecond\` to be a positive finite number, got ${String(perSecond)}`,
    );
  }
  if (!(Number.isSafeInteger(burst) && burst > 0)) {
    throw new InvalidArgumentError(
      'burst',
      `expected \`burst\` to be a positive integer, got ${String(burst)}`,
    );
  }
  if (!(scriptName in redis)) redis.defineCommand(scriptName, { numberOfKeys: 1, lua: takeLua });
  const script = (redis as unknown as Record<string, ScriptCall>)[scriptName]!.bind(redis);
  const perMs = perSecond / 1000;
  const fullAfterMs = Math.ceil(burst / perMs);
  return {
    async take(ownerId) {
      const bucket = toOwnerKeys(ownerId, keyPrefix).rateBucket;
      return Number(await script(bucket, burst, String(perMs), fullAfterMs));
    },
  };
}
