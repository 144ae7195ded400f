/**
 * The development token of a cluster (docs/architecture.md, "Cluster on Redis"): one instance
 * of `runplane serve` keeps its dev token in its SQLite database; the instances of a cluster
 * must accept the same token, so it lives in Redis, under the cluster's key prefix.
 *
 * One `SET NX GET` (Redis 7): the first instance to start stores a fresh token; every other one
 * gets the stored token back in the same command, so concurrent starts agree without a lock.
 *
 * @module
 * @internal
 */
import type { Redis } from 'ioredis';
import { createDevToken } from '../server/auth.js';
import { checkKeyPrefix, defaultKeyPrefix } from './keys.js';
import { recordStoreFailed } from './redis-run-records.js';

/** @internal The key of a cluster's dev token (a string; never expires). */
export const toDevTokenKey = (prefix: string = defaultKeyPrefix): string => `${prefix}dev-token`;

/** A token a bearer header can carry: no whitespace, not empty. */
const tokenShape = /^\S+$/;

/**
 * @internal The cluster's dev token: the one stored under `keyPrefix`, or a fresh one from
 * `createDevToken` stored there first when there is none.
 *
 * @param options.redis - a connection (without `keyPrefix`); never closed here
 * @param options.keyPrefix - the cluster's prefix (non-empty, no braces) @default 'rp:'
 * @returns the token every instance on this Redis and prefix gets
 * @throws `InvalidArgumentError` (`INVALID_ARGUMENT`, rejected) for a bad `keyPrefix`
 * @throws `RunplaneError` (`STORE_FAILED`, rejected) when Redis fails or holds a value that is
 *   not a token
 */
export async function getRedisDevToken(options: {
  readonly redis: Redis;
  readonly keyPrefix?: string;
}): Promise<string> {
  const key = toDevTokenKey(checkKeyPrefix(options.keyPrefix ?? defaultKeyPrefix));
  const fresh = createDevToken();
  let stored: unknown;
  try {
    stored = await options.redis.call('SET', key, fresh, 'NX', 'GET');
  } catch (error) {
    throw recordStoreFailed('dev token', (error as Error).message, error);
  }
  if (stored === null) return fresh;
  if (typeof stored !== 'string' || !tokenShape.test(stored)) {
    throw recordStoreFailed('dev token', `${key} does not hold a token`);
  }
  return stored;
}
