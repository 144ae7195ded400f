/**
 * The live list of the session watch on a real private Redis: an instance that released a
 * session unlists it, unless another instance took the session between its release and its
 * `ZREM` (the taker's `ZADD NX` may land first; the releaser then lists it again).
 */
import { describe, expect, it } from 'vitest';
import { toSessionKeys } from '../../src/cluster/keys.js';
import { unlistReleased } from '../../src/cluster/session-watch.js';
import { skipRedis } from '../redis/redis-server.js';
import { useCluster } from './cluster-helpers.js';

describe.skipIf(skipRedis)('the live list of sessions with work', () => {
  const cluster = useCluster();
  const key = { ownerId: 'alice', sessionId: 's1' };
  const member = JSON.stringify(['alice', 's1']);

  it('a released session nobody holds is unlisted', async () => {
    const keyPrefix = cluster.freshPrefix();
    const redis = cluster.admin();
    await redis.zadd(`${keyPrefix}live-sessions`, 1, member);
    await unlistReleased(redis, keyPrefix, key);
    expect(await redis.zscore(`${keyPrefix}live-sessions`, member)).toBeNull();
  });

  it('a released session another instance took meanwhile stays listed', async () => {
    const keyPrefix = cluster.freshPrefix();
    const redis = cluster.admin();
    // The taker acquired the lease and listed the session before the releaser's ZREM ran.
    await redis.set(toSessionKeys(key, keyPrefix).lease, 'b:2', 'PX', 10_000);
    await redis.zadd(`${keyPrefix}live-sessions`, 1, member);
    await unlistReleased(redis, keyPrefix, key);
    expect(await redis.zscore(`${keyPrefix}live-sessions`, member)).not.toBeNull();
  });
});
