/**
 * The cluster's record stores on a real private Redis, beyond the contract suites
 * (`test/stores/record-stores.test.ts`): a stale holder's record and checkpoint writes are
 * refused, a new holder's mirror is loaded from Redis (and repairs the owner indexes), a list
 * drops what a session's deletion left in the index, waiting hints move with the lease, and
 * the per-owner session quota and request rate hold under concurrent creates and requests from
 * two instances.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { toOwnerKeys } from '../../src/cluster/owner-keys.js';
import { createRedisInbox } from '../../src/cluster/redis-inbox.js';
import { createRedisRateBuckets } from '../../src/cluster/redis-rate-limit.js';
import { createRedisCheckpointStore } from '../../src/cluster/redis-checkpoint-store.js';
import { createOwnerIndex } from '../../src/cluster/redis-owner-index.js';
import {
  createRedisRunRecords,
  createRunRecordReader,
} from '../../src/cluster/redis-run-records.js';
import {
  createRedisSessionRecords,
  createSessionRecordReader,
} from '../../src/cluster/redis-session-records.js';
import type { RunplaneError } from '../../src/errors.js';
import type { SessionKey } from '../../src/events/event-log.js';
import { skipRedis } from '../redis/redis-server.js';
import { pollUntil, useCluster } from './cluster-helpers.js';

const key: SessionKey = { ownerId: 'alice', sessionId: 's1' };
const loopCheckpoint = `loop:${JSON.stringify([key.ownerId, key.sessionId])}`;
const bytes = (text: string) => new TextEncoder().encode(text);

const reasonOf = (error: unknown) => [
  (error as RunplaneError).code,
  (error as { reason?: string }).reason,
];

describe.skipIf(skipRedis)('the cluster record stores', () => {
  const cluster = useCluster();

  /**
   * Instance A holds the session and writes; then its lease expires in Redis (still clock: A
   * never renews, so it still believes it holds the session) and B takes it.
   */
  const takeover = async () => {
    const scene = cluster.scene(key);
    const a = scene.instance('A');
    const b = scene.instance('B');
    const stores = (instance: typeof a) => ({
      runs: createRedisRunRecords(instance),
      sessions: createRedisSessionRecords(instance),
      checkpoints: createRedisCheckpointStore({
        redis: instance.redis,
        keyPrefix: scene.keyPrefix,
        instance,
      }),
    });
    const [atA, atB] = [stores(a), stores(b)];
    await a.acquire(key);
    atA.sessions.create({ ...key, strategy: 'enqueue', graceMs: 5, mode: 'loop', at: 1 });
    atA.runs.create({ runId: 'r1', ...key, input: 'hi', at: 2 });
    atA.runs.setStatus('r1', 'RUNNING', 3);
    await a.flushed(key);
    await atA.checkpoints.set({}, loopCheckpoint, bytes('base by A'));
    // The lease expires now (Redis's own expiry), once A's writes are in: no TTL to race.
    await scene.admin.pexpire(scene.keys.lease, 1);
    await pollUntil(
      async () => (await scene.admin.exists(scene.keys.lease)) === 0,
      'the lease to expire',
    );
    expect(await b.acquire(key)).toEqual({ acquired: true, fence: 2 });
    return { scene, a, b, atA, atB };
  };

  it("refuses a stale holder's record writes (STALE_FENCE) and keeps the new holder's", async () => {
    const { scene, a, b, atA, atB } = await takeover();
    const before = await scene.admin.hgetall(scene.keys.run('r1'));
    // A wakes up still believing it holds the session.
    expect(atA.runs.finish('r1', { status: 'COMPLETED', reason: 'completed' }, 10)).toBe(true);
    expect(
      atA.sessions.update(key.ownerId, key.sessionId, { strategy: 'reject' }, 11),
    ).toBeDefined();
    const refused = await a.flushed(key).catch((error: unknown) => error);
    expect(reasonOf(refused)).toEqual(['STALE_FENCE', 'write_refused']);
    expect(await scene.admin.hgetall(scene.keys.run('r1'))).toEqual(before);
    // A forgot the session with its lease: it finds nothing, and a write is refused at once.
    expect(atA.runs.get(key.ownerId, 'r1')).toBeUndefined();
    expect(atA.sessions.get(key.ownerId, key.sessionId)).toBeUndefined();
    expect(() =>
      atA.sessions.create({ ...key, sessionId: 's1', strategy: 'enqueue', graceMs: 1, at: 12 }),
    ).toThrow(/STALE_FENCE/);
    // B's view was loaded from Redis when it took the lease, and its writes land.
    expect(atB.runs.listUnfinished().map((run) => [run.runId, run.status])).toEqual([
      ['r1', 'RUNNING'],
    ]);
    expect(atB.sessions.get(key.ownerId, key.sessionId)?.strategy).toBe('enqueue');
    expect(atB.runs.finish('r1', { status: 'FAILED', cause: 'owner_lost' }, 13)).toBe(true);
    await b.flushed(key);
    const reader = createRunRecordReader(b);
    expect(await reader.get(key.ownerId, 'r1')).toMatchObject({
      status: 'FAILED',
      outcome: { status: 'FAILED', cause: 'owner_lost' },
      endedAt: 13,
    });
  });

  it("refuses a stale holder's checkpoint write, and any write for a session not held", async () => {
    const { scene, atA, atB } = await takeover();
    const refused = await atA.checkpoints.append!({}, loopCheckpoint, bytes('late patch')).catch(
      (error: unknown) => error,
    );
    expect(reasonOf(refused)).toEqual(['STALE_FENCE', 'write_refused']);
    await expect(atA.checkpoints.delete({}, loopCheckpoint)).rejects.toThrow(/STALE_FENCE/);
    expect(await atB.checkpoints.load!({}, loopCheckpoint)).toEqual({
      base: bytes('base by A'),
      patches: [],
    });
    await atB.checkpoints.append!({}, loopCheckpoint, bytes('patch by B'));
    expect((await atB.checkpoints.load!({}, loopCheckpoint))?.patches).toEqual([
      bytes('patch by B'),
    ]);
    const c = scene.instance('C');
    const atC = createRedisCheckpointStore({
      redis: c.redis,
      keyPrefix: scene.keyPrefix,
      instance: c,
    });
    expect(
      reasonOf(await atC.set({}, loopCheckpoint, bytes('x')).catch((e: unknown) => e)),
    ).toEqual(['STALE_FENCE', 'not_held']);
    // Its keys are in the session's hash tag.
    expect(await scene.admin.keys(`${scene.keyPrefix}${scene.keys.tag}:checkpoint:*`)).toHaveLength(
      2,
    );
  });

  it('a new holder rewrites the owner indexes its session belongs in (repair after a lost write)', async () => {
    const scene = cluster.scene(key);
    const a = scene.instance('A');
    const atA = { runs: createRedisRunRecords(a), sessions: createRedisSessionRecords(a) };
    await a.acquire(key);
    atA.sessions.create({ ...key, strategy: 'enqueue', graceMs: 5, at: 7 });
    atA.runs.create({ runId: 'r1', ...key, input: 'hi', at: 8 });
    await a.flushed(key);
    const owner = toOwnerKeys(key.ownerId, scene.keyPrefix);
    await pollUntil(async () => (await scene.admin.zcard(owner.sessions)) === 1, 'the index');
    expect(await a.release(key)).toBe(true);
    // As if the index writes after the batch had been lost.
    await scene.admin.del(owner.sessions, owner.runs);
    const sessions = createSessionRecordReader(a);
    const runs = createRunRecordReader(a);
    expect(await sessions.list(key.ownerId, { limit: 5 })).toEqual([]);
    expect(await runs.get(key.ownerId, 'r1')).toBeUndefined();
    const b = scene.instance('B');
    createRedisRunRecords(b);
    createRedisSessionRecords(b);
    await b.acquire(key);
    expect((await sessions.list(key.ownerId, { limit: 5 })).map((s) => s.sessionId)).toEqual([
      's1',
    ]);
    expect(await runs.get(key.ownerId, 'r1')).toMatchObject({ runId: 'r1', input: 'hi' });
  });

  it('a list drops, and removes, an index entry whose session record is gone', async () => {
    const scene = cluster.scene(key);
    const a = scene.instance('A');
    const records = createRedisSessionRecords(a);
    for (const [sessionId, at] of [
      ['s1', 1],
      ['s2', 2],
      ['s3', 3],
    ] as const) {
      const session = { ownerId: key.ownerId, sessionId };
      await a.acquire(session);
      records.create({ ...session, strategy: 'enqueue', graceMs: 1, at });
      await a.flushed(session);
    }
    const owner = toOwnerKeys(key.ownerId, scene.keyPrefix);
    await pollUntil(async () => (await scene.admin.zcard(owner.sessions)) === 3, 'the index');
    // s2's record purged, s3 deleted by a holder whose index write was lost.
    await scene.admin.del(scene.keys.meta.replace('2:s1', '2:s2'));
    const s3 = { ownerId: key.ownerId, sessionId: 's3' };
    await a.release(s3);
    const meta = scene.keys.meta.replace('2:s1', '2:s3');
    const stored = JSON.parse((await scene.admin.hget(meta, 'record'))!) as object;
    await scene.admin.hset(meta, 'record', JSON.stringify({ ...stored, deletedAt: 9 }));
    const reader = createSessionRecordReader(a);
    expect((await reader.list(key.ownerId, { limit: 2 })).map((s) => s.sessionId)).toEqual(['s1']);
    expect(await reader.count(key.ownerId)).toBe(1);
  });

  it('keeps waiting hints across a lease move, in order; a drain is shipped too', async () => {
    const scene = cluster.scene(key);
    const [a, b, c] = ['A', 'B', 'C'].map((id) => scene.instance(id));
    const [atA, atB, atC] = [a!, b!, c!].map((instance) => createRedisInbox(instance));
    const hint = (id: string) => ({
      id,
      text: `hint ${id} ["x"] 🙂`,
      source: 'user-supplement',
      at: 2 ** 50,
    });
    expect(() => atA!.push({}, key, hint('h0'))).toThrow(/STALE_FENCE/);
    await a!.acquire(key);
    for (const id of ['h1', 'h2', 'h3']) atA!.push({}, key, hint(id));
    expect(atA!.drain({}, key)).toEqual([hint('h1'), hint('h2'), hint('h3')]);
    for (const id of ['h4', 'h5']) atA!.push({}, key, hint(id));
    expect(await a!.release(key)).toBe(true);
    await b!.acquire(key);
    expect(atB!.size({}, key)).toBe(2);
    atB!.push({}, key, hint('h6'));
    expect(atB!.drain({}, key)).toEqual([hint('h4'), hint('h5'), hint('h6')]);
    atB!.push({}, key, hint('h7'));
    expect(await b!.release(key)).toBe(true);
    await c!.acquire(key);
    expect(atC!.drain({}, key)).toEqual([hint('h7')]);
  });

  it('round-trips any run record exactly: any text, any safe ms, through mirror, batch and reader', async () => {
    const scene = cluster.scene(key);
    const a = scene.instance('A');
    const runs = createRedisRunRecords(a);
    const reader = createRunRecordReader(a);
    await a.acquire(key);
    let n = 0;
    const text = fc.string({ unit: 'binary', maxLength: 200 });
    await fc.assert(
      fc.asyncProperty(
        text,
        fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER - 1 }),
        fc.record(
          {
            status: fc.constantFrom('COMPLETED', 'FAILED', 'CANCELLED'),
            reason: text,
            cause: text,
            error: text,
            reply: text,
            escalated: fc.boolean(),
          },
          { requiredKeys: ['status'] },
        ),
        async (input, at, outcome) => {
          const runId = `run-${++n}`;
          runs.create({ runId, ...key, input, at });
          expect(runs.finish(runId, outcome, at + 1)).toBe(true);
          await a.flushed(key);
          const expected = {
            runId,
            ...key,
            status: outcome.status,
            input,
            createdAt: at,
            updatedAt: at + 1,
            endedAt: at + 1,
            outcome,
          };
          expect(runs.get(key.ownerId, runId)).toEqual(expected);
          expect(await reader.get(key.ownerId, runId)).toEqual(expected);
        },
      ),
      { numRuns: 100 },
    );
  });

  it('holds the per-owner session quota under concurrent creates from two instances', async () => {
    const scene = cluster.scene(key);
    const instances = [scene.instance('A'), scene.instance('B')];
    const max = 5;
    const records = instances.map((instance) => createRedisSessionRecords(instance));
    const indexes = instances.map((instance) => createOwnerIndex(instance.redis, scene.keyPrefix));
    // 2 × 12 creates at once, each a reserve then (when reserved) a create on its instance.
    const attempts = instances.flatMap((instance, i) =>
      Array.from({ length: 12 }, async (_, n) => {
        const session = { ownerId: key.ownerId, sessionId: `${instance.instanceId}-${n}` };
        const quota = { max, at: 100, holdMs: 60_000 };
        if ((await indexes[i]!.reserve(session.ownerId, session.sessionId, quota)) === 'full') {
          return false;
        }
        await instance.acquire(session);
        records[i]!.create({ ...session, strategy: 'enqueue', graceMs: 1, at: 100 + n });
        await instance.flushed(session);
        return true;
      }),
    );
    const created = (await Promise.all(attempts)).filter(Boolean).length;
    expect(created).toBe(max);
    const owner = toOwnerKeys(key.ownerId, scene.keyPrefix);
    await pollUntil(async () => (await scene.admin.zcard(owner.sessions)) === max, 'the index');
    expect(await scene.admin.hlen(owner.reservedSessions)).toBe(0);
    const quota = { max, at: 200, holdMs: 50 };
    expect(await indexes[0]!.reserve(key.ownerId, 'late', quota)).toBe('full');
    // Deleting one frees its slot; a reservation no create followed expires after its hold.
    const [first] = await createSessionRecordReader(instances[0]!).list(key.ownerId, { limit: 1 });
    const holder = instances.find((i) => i.fenceOf(first!) !== undefined)!;
    records[instances.indexOf(holder)]!.markDeleted(first!.ownerId, first!.sessionId, 300);
    await holder.flushed(first!);
    await pollUntil(
      async () => (await scene.admin.zcard(owner.sessions)) === max - 1,
      'the removal',
    );
    expect(await indexes[1]!.reserve(key.ownerId, 'late', quota)).toBe('reserved');
    expect(await indexes[1]!.reserve(key.ownerId, 'later', quota)).toBe('full');
    expect(await indexes[1]!.reserve(key.ownerId, 'later', { ...quota, at: 250 })).toBe('reserved');
  });
});

describe.skipIf(skipRedis)('the cluster rate limit', () => {
  const cluster = useCluster();

  it('gives an owner one burst across instances, taken at once from two of them', async () => {
    const keyPrefix = cluster.freshPrefix();
    // 0.001 tokens/s: nothing refills while the test runs, so the counts are exact.
    const options = { keyPrefix, perSecond: 0.001, burst: 4 };
    const [a, b] = [cluster.connect(), cluster.connect()].map((redis) =>
      createRedisRateBuckets({ ...options, redis }),
    );
    const waits = await Promise.all(
      Array.from({ length: 20 }, (_, i) => (i % 2 === 0 ? a! : b!).take('alice')),
    );
    expect(waits.filter((wait) => wait === 0)).toHaveLength(4);
    for (const wait of waits.filter((w) => w > 0)) {
      expect(wait).toBeGreaterThan(990_000); // about one token's time: 1 / 0.001 s
      expect(wait).toBeLessThanOrEqual(1_000_000);
    }
    expect(await a!.take('bob')).toBe(0); // per owner
    const bucket = toOwnerKeys('alice', keyPrefix).rateBucket;
    const ttl = await cluster.admin().pttl(bucket);
    expect(ttl).toBeGreaterThan(0); // dropped once it would be full again
    expect(ttl).toBeLessThanOrEqual(4_000_000);
  });

  it('refuses bad options with INVALID_ARGUMENT', () => {
    const redis = cluster.admin();
    for (const bad of [
      { perSecond: 0, burst: 1 },
      { perSecond: Number.NaN, burst: 1 },
      { perSecond: 1, burst: 1.5 },
      { perSecond: 1, burst: 0 },
    ]) {
      expect(() => createRedisRateBuckets({ ...bad, redis, keyPrefix: 'x:' })).toThrow(
        /INVALID_ARGUMENT/,
      );
    }
  });
});
