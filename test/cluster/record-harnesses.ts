/**
 * The cluster's record stores as contract-suite harnesses: writes go through a holder's mirror
 * (the session's lease taken on first use) and are awaited into Redis; reads come from the
 * Redis reader, checked against the holder's mirror, so one suite checks both.
 */
import { expect } from 'vitest';
import { SimulatedClock } from 'xstate';
import type { ClusterInstance } from '../../src/cluster/cluster-instance.js';
import { createRedisIdempotencyKeys } from '../../src/cluster/redis-idempotency-keys.js';
import {
  createRedisRunRecords,
  createRunRecordReader,
} from '../../src/cluster/redis-run-records.js';
import { createRedisSessionStore } from '../../src/cluster/redis-session-store.js';
import {
  createRedisSessionRecords,
  createSessionRecordReader,
} from '../../src/cluster/redis-session-records.js';
import type { SessionKey } from '../../src/events/event-log.js';
import type { IdempotencyKeys } from '../../src/stores/idempotency-keys.js';
import type { RunRecords } from '../../src/stores/run-records.js';
import type { SessionRecords } from '../../src/stores/session-records.js';
import type { SessionStore } from '../../src/stores/session-store.js';
import type { StoreHarness } from '../stores/record-store-contract.js';
import type { ClusterHarness } from './cluster-helpers.js';

/** A holder instance on a fresh prefix (simulated, still clock: its leases never lapse). */
export function holderOf(cluster: ClusterHarness, instanceId = 'A'): ClusterInstance {
  return cluster.instance({
    instanceId,
    keyPrefix: cluster.freshPrefix(),
    clock: new SimulatedClock(),
  });
}

/** Takes the session's lease (once) and fails the test when another instance holds it. */
async function hold(instance: ClusterInstance, key: SessionKey): Promise<void> {
  if (instance.fenceOf(key) !== undefined) return;
  const grant = await instance.acquire(key);
  if (!grant.acquired) throw new Error(`session ${key.sessionId} is held by ${grant.holder}`);
}

/** Run records: the holder's mirror for writes, the reader for `get` (checked equal). */
export function redisRunRecordsHarness(
  cluster: ClusterHarness,
): () => Promise<StoreHarness<RunRecords>> {
  return () => {
    const instance = holderOf(cluster);
    const mirror = createRedisRunRecords(instance);
    const reader = createRunRecordReader(instance);
    const sessionOf = new Map<string, SessionKey>();
    const flushed = async (runId: string) => {
      const key = sessionOf.get(runId);
      if (key !== undefined) await instance.flushed(key);
    };
    const store: StoreHarness<RunRecords>['store'] = {
      async create(record) {
        const key = { ownerId: record.ownerId, sessionId: record.sessionId };
        await hold(instance, key);
        mirror.create(record);
        sessionOf.set(record.runId, key);
        await instance.flushed(key);
      },
      async setStatus(runId, status, at) {
        const changed = mirror.setStatus(runId, status, at);
        await flushed(runId);
        return changed;
      },
      async finish(runId, outcome, at) {
        const changed = mirror.finish(runId, outcome, at);
        await flushed(runId);
        return changed;
      },
      async get(ownerId, runId) {
        const stored = await reader.get(ownerId, runId);
        expect(stored).toEqual(mirror.get(ownerId, runId));
        return stored;
      },
      async listUnfinished() {
        const held = mirror.listUnfinished();
        const keys = new Map([...sessionOf.values()].map((key) => [JSON.stringify(key), key]));
        const stored = (
          await Promise.all([...keys.values()].map((key) => reader.listUnfinished(key)))
        ).flat();
        expect(stored.sort((x, y) => x.createdAt - y.createdAt)).toEqual(held);
        return held;
      },
    };
    return Promise.resolve({ store, dispose: () => instance.close() });
  };
}

/** Session records: the holder's mirror for writes, the reader for reads (checked equal). */
export function redisSessionRecordsHarness(
  cluster: ClusterHarness,
): () => Promise<StoreHarness<SessionRecords>> {
  return () => {
    const instance = holderOf(cluster);
    const mirror = createRedisSessionRecords(instance);
    const reader = createSessionRecordReader(instance);
    const written = async <T>(key: SessionKey, result: T) => {
      if (instance.fenceOf(key) !== undefined) await instance.flushed(key);
      return result;
    };
    const store: StoreHarness<SessionRecords>['store'] = {
      async create(record) {
        const key = { ownerId: record.ownerId, sessionId: record.sessionId };
        await hold(instance, key);
        return written(key, mirror.create(record));
      },
      async get(ownerId, sessionId) {
        const stored = await reader.get(ownerId, sessionId);
        expect(stored).toEqual(mirror.get(ownerId, sessionId));
        return stored;
      },
      update: (ownerId, sessionId, changes, at) =>
        written({ ownerId, sessionId }, mirror.update(ownerId, sessionId, changes, at)),
      async list(ownerId, page) {
        const stored = await reader.list(ownerId, page);
        expect(stored).toEqual(mirror.list(ownerId, page));
        return stored;
      },
      async listLoops(filter) {
        // The reader lists every live loop session; only the holder knows which owe an answer.
        if (filter?.owing === true) return mirror.listLoops(filter);
        const stored = await reader.listLoops();
        expect(stored).toEqual(mirror.listLoops());
        return stored;
      },
      async count(ownerId) {
        const stored = await reader.count(ownerId);
        expect(stored).toBe(mirror.count(ownerId));
        return stored;
      },
      markLoopOwes: (ownerId, sessionId, owes) =>
        written({ ownerId, sessionId }, mirror.markLoopOwes(ownerId, sessionId, owes)),
      markDeleted: (ownerId, sessionId, at) =>
        written({ ownerId, sessionId }, mirror.markDeleted(ownerId, sessionId, at)),
    };
    return Promise.resolve({ store, dispose: () => instance.close() });
  };
}

/**
 * Session histories: the holder writes (taking the lease on first use); reads come from a
 * second instance that holds nothing, checked against the holder's own read.
 */
export function redisSessionStoreHarness(
  cluster: ClusterHarness,
): () => Promise<StoreHarness<SessionStore>> {
  return () => {
    const holder = holderOf(cluster);
    const readerInstance = cluster.instance({
      instanceId: 'R',
      keyPrefix: holder.keyPrefix,
      clock: new SimulatedClock(),
    });
    const atHolder = createRedisSessionStore(holder);
    const atReader = createRedisSessionStore(readerInstance);
    const store: SessionStore = {
      async load(ctx, key) {
        const stored = await atReader.load(ctx, key);
        expect(stored).toEqual(await atHolder.load(ctx, key));
        return stored;
      },
      async append(ctx, key, messages) {
        await hold(holder, key);
        await atHolder.append(ctx, key, messages);
      },
      async clear(ctx, key) {
        await hold(holder, key);
        await atHolder.clear(ctx, key);
      },
    };
    return Promise.resolve({ store, dispose: () => undefined });
  };
}

/** Idempotency keys: the Redis scripts themselves (async, no mirror). */
export function redisIdempotencyKeysHarness(
  cluster: ClusterHarness,
): () => Promise<StoreHarness<IdempotencyKeys>> {
  return () =>
    Promise.resolve({
      store: createRedisIdempotencyKeys({
        redis: cluster.admin(),
        keyPrefix: cluster.freshPrefix(),
      }),
      dispose: () => undefined,
    });
}
