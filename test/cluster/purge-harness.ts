/**
 * The cluster's purge as a contract harness (`test/stores/session-purge.contract.ts`), and what
 * Redis still holds of a session.
 */
import type { Redis } from 'ioredis';
import { SimulatedClock } from 'xstate';
import type { ClusterInstance } from '../../src/cluster/cluster-instance.js';
import { toSessionKeys } from '../../src/cluster/keys.js';
import { toOwnerKeys } from '../../src/cluster/owner-keys.js';
import { createRedisRunRecords } from '../../src/cluster/redis-run-records.js';
import { createRedisSessionPurge } from '../../src/cluster/redis-session-purge.js';
import { createRedisSessionRecords } from '../../src/cluster/redis-session-records.js';
import { createRedisSessionStore } from '../../src/cluster/redis-session-store.js';
import type { SessionKey } from '../../src/events/event-log.js';
import type { PurgeHarness } from '../stores/session-purge.contract.js';
import type { ClusterHarness } from './cluster-helpers.js';

/**
 * What Redis holds of a session: each Stream entry, List element or set member is one, a hash
 * or a string is one; the fence (kept to expire, see `redis-session-purge.ts`) is not counted;
 * the owner's run-index entries naming the session are.
 */
export async function redisLeft(redis: Redis, keyPrefix: string, key: SessionKey): Promise<number> {
  const keys = toSessionKeys(key, keyPrefix);
  const found: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await redis.scan(
      cursor,
      'MATCH',
      `${keyPrefix}${keys.tag.replace(/[*?[\]\\]/g, '\\$&')}:*`,
      'COUNT',
      1000,
    );
    cursor = next;
    found.push(...batch);
  } while (cursor !== '0');
  let n = 0;
  for (const name of found) {
    if (name === keys.fence) continue;
    const type = await redis.type(name);
    if (type === 'stream') n += await redis.xlen(name);
    else if (type === 'list') n += await redis.llen(name);
    else if (type === 'set') n += await redis.scard(name);
    else n += 1;
  }
  const index = await redis.hgetall(toOwnerKeys(key.ownerId, keyPrefix).runs);
  return n + Object.values(index).filter((sessionId) => sessionId === key.sessionId).length;
}

/** The cluster's stores on one instance (simulated clock: its leases never lapse). */
export function redisPurgeHarness(cluster: ClusterHarness): () => Promise<PurgeHarness> {
  return async () => {
    const keyPrefix = cluster.freshPrefix();
    const instance: ClusterInstance = cluster.instance({
      instanceId: 'A',
      keyPrefix,
      clock: new SimulatedClock(),
    });
    const sessions = createRedisSessionRecords(instance);
    const runs = createRedisRunRecords(instance);
    const sessionStore = createRedisSessionStore(instance);
    const { redis } = instance;
    return {
      purge: createRedisSessionPurge({ redis, keyPrefix }),
      eventLog: instance.eventLog,
      sessions,
      runs,
      sessionStore,
      async hold(key) {
        if (instance.fenceOf(key) !== undefined) return;
        const grant = await instance.acquire(key);
        if (!grant.acquired) throw new Error(`held by ${grant.holder}`);
      },
      async settle(key) {
        await instance.flushed(key);
        await instance.release(key);
      },
      left: (key) => redisLeft(redis, keyPrefix, key),
      close: async () => undefined,
    };
  };
}
