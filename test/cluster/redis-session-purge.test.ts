/**
 * The cluster's purge of deleted sessions on a real private Redis, beyond the contract
 * (`test/stores/session-purge.test.ts`): it refuses while the lease is held or a run is
 * unfinished, it bounds a step's bytes, it keeps the fence to expire, the deleted-session set is
 * written and repaired with the rule of two slots, a stale entry of a live session is dropped,
 * and the data sweep drives it.
 */
import { describe, expect, it } from 'vitest';
import { SimulatedClock } from 'xstate';
import type { ClusterInstance } from '../../src/cluster/cluster-instance.js';
import { toDeletedSessionsKey, toOwnerKeys } from '../../src/cluster/owner-keys.js';
import { createRedisCheckpointStore } from '../../src/cluster/redis-checkpoint-store.js';
import { createRedisRunRecords } from '../../src/cluster/redis-run-records.js';
import { createRedisSessionPurge } from '../../src/cluster/redis-session-purge.js';
import {
  createRedisSessionRecords,
  createSessionRecordReader,
} from '../../src/cluster/redis-session-records.js';
import { createRedisSessionStore } from '../../src/cluster/redis-session-store.js';
import type { SessionKey } from '../../src/events/event-log.js';
import { createDataSweeper, type SweepReport } from '../../src/server/data-sweeper.js';
import { skipRedis } from '../redis/redis-server.js';
import { redisLeft } from './purge-harness.js';
import { pollUntil, useCluster } from './cluster-helpers.js';

const key: SessionKey = { ownerId: 'alice', sessionId: 's1' };
const other: SessionKey = { ownerId: 'alice', sessionId: 's2' };
const member = (k: SessionKey) => JSON.stringify([k.ownerId, k.sessionId]);

describe.skipIf(skipRedis)('the purge of deleted sessions on Redis', () => {
  const cluster = useCluster();

  /** A holder with the record stores on a fresh prefix, and the purge on its connection. */
  const world = (options: { maxBytesPerStep?: number } = {}) => {
    const scene = cluster.scene(key);
    const a = scene.instance('A');
    const stores = {
      sessions: createRedisSessionRecords(a),
      runs: createRedisRunRecords(a),
      history: createRedisSessionStore(a),
      checkpoints: createRedisCheckpointStore({
        redis: a.redis,
        keyPrefix: scene.keyPrefix,
        instance: a,
      }),
    };
    const purge = createRedisSessionPurge({
      redis: scene.admin,
      keyPrefix: scene.keyPrefix,
      ...options,
    });
    const deletedKey = toDeletedSessionsKey(scene.keyPrefix);
    /** A session with `events` events of `payloadBytes` each and one run in `status`. */
    const seed = async (k: SessionKey, { events = 3, payloadBytes = 10, finished = true } = {}) => {
      await a.acquire(k);
      stores.sessions.create({ ...k, strategy: 'reject', graceMs: 0, mode: 'loop', at: 1 });
      stores.runs.create({ runId: `${k.sessionId}.r1`, ...k, input: 'hi', at: 1 });
      if (finished) stores.runs.finish(`${k.sessionId}.r1`, { status: 'COMPLETED' }, 2);
      for (let i = 0; i < events; i++) {
        a.eventLog.append({}, k, {
          type: 'agent.message',
          runId: `${k.sessionId}.r1`,
          payload: { text: 'x'.repeat(payloadBytes) },
          at: 3,
        });
      }
      await stores.history.append({}, k, [{ role: 'user', content: 'hi' }]);
      await stores.checkpoints.set({}, `loop:${member(k)}`, new Uint8Array([1, 2, 3]));
      await stores.checkpoints.append!({}, `loop:${member(k)}`, new Uint8Array([4]));
      await a.flushed(k);
    };
    const markDeleted = async (k: SessionKey, at = 50) => {
      expect(stores.sessions.markDeleted(k.ownerId, k.sessionId, at)).toBe(true);
      await a.flushed(k);
      await pollUntil(
        async () => (await scene.admin.zscore(deletedKey, member(k))) !== null,
        'the deleted session to be listed',
      );
    };
    return { scene, a, stores, purge, seed, markDeleted, deletedKey };
  };

  it('refuses (busy) while anyone holds the lease, deleting nothing', async () => {
    const { scene, a, purge, seed, markDeleted } = world();
    await seed(key);
    await markDeleted(key);
    const before = await redisLeft(scene.admin, scene.keyPrefix, key);
    expect(await purge.purgeStep(key, 500)).toBe('busy');
    expect(await redisLeft(scene.admin, scene.keyPrefix, key)).toBe(before);
    expect(await purge.deleted(5)).toEqual([key]);
    await a.release(key);
    for (let r = await purge.purgeStep(key, 500); r !== true; r = await purge.purgeStep(key, 500)) {
      expect(r).toBe(false);
    }
    expect(await redisLeft(scene.admin, scene.keyPrefix, key)).toBe(0);
    // The loop checkpoint (base and patches) went with it.
    expect(await scene.admin.keys(`${scene.keyPrefix}${scene.keys.tag}:checkpoint:*`)).toEqual([]);
  });

  it('refuses (busy) while a run is unfinished, before anything but finished runs goes', async () => {
    const { scene, a, stores, purge, seed, markDeleted } = world();
    await seed(key, { finished: false });
    await markDeleted(key);
    await a.release(key);
    const owner = toOwnerKeys(key.ownerId, scene.keyPrefix);
    expect(await scene.admin.hget(owner.runs, 's1.r1')).toBe('s1');
    expect(await purge.purgeStep(key, 500)).toBe('busy');
    expect(await scene.admin.xlen(scene.keys.events)).toBe(3);
    expect(await scene.admin.exists(scene.keys.run('s1.r1'))).toBe(1);
    // Once a holder ends the run (as failover marks it), the purge goes through.
    await a.acquire(key);
    stores.runs.finish('s1.r1', { status: 'FAILED', cause: 'owner_lost' }, 60);
    await a.release(key);
    let steps = 0;
    for (let r = await purge.purgeStep(key, 500); r !== true; r = await purge.purgeStep(key, 500)) {
      expect(r).toBe(false);
      steps++;
    }
    expect(steps).toBeGreaterThan(0);
    expect(await scene.admin.hget(owner.runs, 's1.r1')).toBeNull();
    expect(await redisLeft(scene.admin, scene.keyPrefix, key)).toBe(0);
  });

  it("removes only the owner's run-index entries that name the session", async () => {
    const { scene, a, purge, seed, markDeleted } = world();
    await seed(key);
    await markDeleted(key);
    await a.release(key);
    const owner = toOwnerKeys(key.ownerId, scene.keyPrefix);
    // Another session's run that names its own session under an id this session also holds.
    await scene.admin.sadd(scene.keys.runs, 'shared');
    await scene.admin.hset(owner.runs, 'shared', 's9');
    while ((await purge.purgeStep(key, 500)) !== true);
    expect(await scene.admin.hgetall(owner.runs)).toEqual({ shared: 's9' });
  });

  it('bounds the bytes of a step: big events and messages go a few at a time', async () => {
    const { scene, a, stores, purge, seed, markDeleted } = world({ maxBytesPerStep: 10_000 });
    await seed(key, { events: 20, payloadBytes: 3_000 });
    const big = { role: 'user' as const, content: 'y'.repeat(3_000) };
    await stores.history.append(
      {},
      key,
      Array.from({ length: 11 }, () => big),
    );
    await markDeleted(key);
    await a.release(key);
    const sizes = async () => ({
      events: await scene.admin.xlen(scene.keys.events),
      history: await scene.admin.llen(scene.keys.history),
    });
    const seen = [await sizes()];
    while ((await purge.purgeStep(key, 500)) === false) seen.push(await sizes());
    const taken = (field: 'events' | 'history') =>
      seen
        .slice(1)
        .map((now, i) => seen[i]![field] - now[field])
        .filter((n) => n > 0);
    // 3 KB entries, 10 KB a step: 4 entries a step (the fourth crosses the bound), never 500.
    expect(taken('events')).toEqual([4, 4, 4, 4, 4]);
    // 'hi' and 11 big messages: 'hi' is small, so the first step takes it and 4 big ones.
    expect(taken('history')).toEqual([5, 4, 3]);
    expect(await redisLeft(scene.admin, scene.keyPrefix, key)).toBe(0);
  });

  it('refuses a batch size Lua cannot unpack, or none', async () => {
    const { purge } = world();
    for (const batchSize of [0, 1.5, 1_001]) {
      await expect(purge.purgeStep(key, batchSize)).rejects.toMatchObject({
        code: 'INVALID_ARGUMENT',
      });
    }
  });

  it('keeps the fence to expire; a session made again under the id goes on from it, for good', async () => {
    const { scene, a, stores, purge, seed, markDeleted } = world();
    await seed(key);
    await markDeleted(key);
    await a.release(key);
    while ((await purge.purgeStep(key, 500)) !== true);
    expect(await scene.admin.get(scene.keys.fence)).toBe('1');
    const ttl = await scene.admin.pttl(scene.keys.fence);
    expect(ttl).toBeGreaterThan(86_400_000 - 60_000);
    expect(await a.acquire(key)).toEqual({ acquired: true, fence: 2 });
    expect(await scene.admin.pttl(scene.keys.fence)).toBe(-1);
    expect(
      stores.sessions.create({ ...key, strategy: 'reject', graceMs: 0, at: 99 }),
    ).toBeDefined();
    await a.flushed(key);
  });

  it('lists a deleted session again when its lease is taken or a list meets it (repair)', async () => {
    const { scene, a, purge, seed, markDeleted, deletedKey } = world();
    await seed(key);
    await seed(other);
    await markDeleted(key, 70);
    await a.release(key);
    // As if the write after the delete's batch had been lost (a crash between the two slots).
    await scene.admin.zrem(deletedKey, member(key));
    expect(await purge.deleted(5)).toEqual([]);
    // A new holder's load lists it again, with its deletion time.
    const b: ClusterInstance = scene.instance('B');
    createRedisSessionRecords(b);
    await b.acquire(key);
    expect(await scene.admin.zscore(deletedKey, member(key))).toBe('70');
    await b.release(key);
    // Lost again, and the owner index still lists it: a list drops it and lists it for the purge.
    await scene.admin.zrem(deletedKey, member(key));
    const owner = toOwnerKeys(key.ownerId, scene.keyPrefix);
    await scene.admin.zadd(owner.sessions, 0, `${String(1).padStart(16, '0')}:s1`);
    const reader = createSessionRecordReader({ redis: scene.admin, keyPrefix: scene.keyPrefix });
    expect((await reader.list(key.ownerId, { limit: 5 })).map((s) => s.sessionId)).toEqual(['s2']);
    expect(await purge.deleted(5)).toEqual([key]);
  });

  it('drops the stale entry of a live session without touching it', async () => {
    const { scene, a, purge, seed, deletedKey } = world();
    await seed(key);
    await a.release(key);
    await scene.admin.zadd(deletedKey, 5, member(key));
    const before = await redisLeft(scene.admin, scene.keyPrefix, key);
    expect(await purge.purgeStep(key, 500)).toBe(true);
    expect(await redisLeft(scene.admin, scene.keyPrefix, key)).toBe(before);
    expect(await purge.deleted(5)).toEqual([]);
  });

  it('is driven by the data sweep: a held session is left for a later sweep, the rest purged', async () => {
    const { scene, a, stores, purge, seed, markDeleted } = world();
    await seed(key);
    await seed(other);
    await markDeleted(key, 10);
    await markDeleted(other, 20);
    await a.release(other); // `key` stays held: busy
    const reports: SweepReport[] = [];
    const sweeper = createDataSweeper({
      purge,
      sessions: stores.sessions,
      clock: new SimulatedClock(),
      batchSize: 2,
      reportError: (error) => {
        throw error;
      },
      onSwept: (report) => reports.push(report),
    });
    try {
      await sweeper.sweep(); // after the one the sweeper starts with
      expect(await purge.deleted(5)).toEqual([key]);
      expect(await redisLeft(scene.admin, scene.keyPrefix, other)).toBe(0);
      expect(reports).toEqual([{ expired: 0, purged: 1, steps: expect.any(Number) as number }]);
      await a.release(key);
      expect(await sweeper.sweep()).toMatchObject({ purged: 1 });
      expect(await purge.deleted(5)).toEqual([]);
      expect(await redisLeft(scene.admin, scene.keyPrefix, key)).toBe(0);
    } finally {
      await sweeper.stop();
    }
  });
});
