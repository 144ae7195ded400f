/**
 * The EventLog contract, run against every implementation (memory, SQLite, and the cluster's log
 * on a private Redis, where an instance holds the sessions' leases), plus what only a durable log
 * can promise: seq survives a reopen and never rewinds.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createClusterInstance, type ClusterInstance } from '../../src/cluster/cluster-instance.js';
import type { EventLog, RunplaneEvent } from '../../src/events/event-log.js';
import { createMemoryEventLog } from '../../src/events/memory-event-log.js';
import { openSqliteDatabase } from '../../src/stores/sqlite/database.js';
import { createSqliteEventLog } from '../../src/stores/sqlite/event-log.js';
import { skipRedis, usePrivateRedis } from '../redis/redis-server.js';

const dir = mkdtempSync(join(tmpdir(), 'runplane-event-log-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;
const freshPath = () => join(dir, `log-${++files}.db`);

const a = { ownerId: 'alice', sessionId: 's1' };
const b = { ownerId: 'bob', sessionId: 's1' };

const redis = skipRedis ? undefined : usePrivateRedis();
const connections: Redis[] = [];
let instances: ClusterInstance[] = [];
afterEach(async () => {
  await Promise.all(instances.map((instance) => instance.close()));
  instances = [];
});
afterAll(async () => {
  await Promise.all(connections.map((connection) => connection.quit()));
});
let prefixes = 0;

/** A cluster instance on a fresh key prefix that holds the leases of sessions `a` and `b`. */
async function createRedisEventLog(readBatchSize?: number): Promise<EventLog> {
  if (redis === undefined) throw new Error('no redis-server');
  const connection = new Redis(redis().url);
  connections.push(connection);
  const instance = createClusterInstance({
    redis: connection,
    keyPrefix: `contract${++prefixes}:`,
    readBatchSize,
  });
  instances.push(instance);
  await instance.acquire(a);
  await instance.acquire(b);
  return instance.eventLog;
}

type Implementation = [string, () => (EventLog & { close?: () => void }) | Promise<EventLog>];

const implementations: Implementation[] = [
  ['memory', () => createMemoryEventLog()],
  ['sqlite file', () => createSqliteEventLog({ path: freshPath() })],
  [
    'sqlite followBatchSize 2',
    () => createSqliteEventLog({ path: freshPath(), followBatchSize: 2 }),
  ],
  ['sqlite without a tail', () => createSqliteEventLog({ path: freshPath(), tail: { events: 0 } })],
  // One event per follow query, whatever the batch size: the payload bound decides.
  [
    'sqlite followBatchBytes 1',
    () => createSqliteEventLog({ path: freshPath(), followBatchBytes: 1 }),
  ],
  // A tail budget of about two events for the whole log: tails are dropped and shifted often.
  [
    'sqlite tail of 500 bytes',
    () => createSqliteEventLog({ path: freshPath(), tail: { bytes: 500 } }),
  ],
  ...(skipRedis
    ? []
    : ([
        ['redis (a cluster instance holding the sessions)', () => createRedisEventLog()],
        // One Stream entry per XRANGE: every read and follow pages.
        ['redis readBatchSize 1', () => createRedisEventLog(1)],
      ] satisfies Implementation[])),
];

const seqOf = (result: IteratorResult<RunplaneEvent>) =>
  result.done === true ? -1 : result.value.seq;
const brief = (events: RunplaneEvent[]) => events.map((e) => [e.seq, e.type, e.runId ?? null]);

describe.each(implementations)('EventLog contract: %s', (_name, create) => {
  it('numbers each session from 1, strictly increasing, separately per owner and session', async () => {
    const log: EventLog & { close?: () => void } = await create();
    expect(log.lastSeq({}, a)).toBe(0);
    const first = log.append({}, a, { type: 'x.one', at: 5, runId: 'r1', payload: { n: 1 } });
    const second = log.append({}, a, { type: 'x.two', at: 6 });
    log.append({}, b, { type: 'x.other', at: 7 });
    expect(first).toMatchObject({ seq: 1, sessionId: 's1', runId: 'r1', type: 'x.one', at: 5 });
    expect(first.id).toMatch(/^[\w-]{21}\.[0-9a-z]+$/); // a per-log nanoid prefix and a counter
    expect(second.id).not.toBe(first.id);
    expect(brief(await log.read({}, a))).toEqual([
      [1, 'x.one', 'r1'],
      [2, 'x.two', null],
    ]);
    expect(brief(await log.read({}, b))).toEqual([[1, 'x.other', null]]);
    expect(log.lastSeq({}, a)).toBe(2);
    expect((await log.read({}, a))[0]?.payload).toEqual({ n: 1 });
    log.close?.();
  });

  it('reads after an exclusive cursor, with a limit, by run and by types', async () => {
    const log: EventLog & { close?: () => void } = await create();
    for (let i = 1; i <= 6; i++) {
      log.append({}, a, { type: i % 2 === 0 ? 'even' : 'odd', at: i, runId: i <= 3 ? 'r1' : 'r2' });
    }
    expect(brief(await log.read({}, a, { after: 4 })).map(([seq]) => seq)).toEqual([5, 6]);
    expect(brief(await log.read({}, a, { after: 1, limit: 2 })).map(([seq]) => seq)).toEqual([
      2, 3,
    ]);
    expect(brief(await log.read({}, a, { runId: 'r2' })).map(([seq]) => seq)).toEqual([4, 5, 6]);
    expect(brief(await log.read({}, a, { types: ['even'], after: 2 })).map(([seq]) => seq)).toEqual(
      [4, 6],
    );
    expect(await log.read({}, a, { types: [] })).toEqual([]);
    log.close?.();
  });

  it('follow replays, then wakes on each append, and ends without throwing on abort', async () => {
    const log: EventLog & { close?: () => void } = await create();
    log.append({}, a, { type: 'old', at: 1 });
    const stop = new AbortController();
    const seen: number[] = [];
    const iterator = log.follow({ signal: stop.signal }, a, { after: 0 })[Symbol.asyncIterator]();
    seen.push(seqOf(await iterator.next()));
    const next = iterator.next(); // waits: nothing new yet
    log.append({}, b, { type: 'other session', at: 2 });
    log.append({}, a, { type: 'new', at: 3 });
    seen.push(seqOf(await next));
    const pending = iterator.next();
    stop.abort();
    expect(await pending).toEqual({ done: true, value: undefined });
    expect(seen).toEqual([1, 2]);
    log.close?.();
  });

  it('follow with a type filter skips other events and still sees later matches', async () => {
    const log: EventLog & { close?: () => void } = await create();
    for (let i = 0; i < 5; i++) log.append({}, a, { type: 'noise', at: i });
    const stop = new AbortController();
    const followed = log.follow({ signal: stop.signal }, a, { types: ['wanted'] });
    const iterator = followed[Symbol.asyncIterator]();
    const next = iterator.next();
    log.append({}, a, { type: 'noise', at: 9 });
    log.append({}, a, { type: 'wanted', at: 10 });
    expect((await next).value).toMatchObject({ seq: 7, type: 'wanted' });
    stop.abort();
    log.close?.();
  });

  it('hasRun tells a run that logged in this session from one that never did', async () => {
    const log: EventLog & { close?: () => void } = await create();
    log.append({}, a, { type: 'x', at: 1, runId: 'r1' });
    expect(log.hasRun({}, a, 'r1')).toBe(true);
    expect(log.hasRun({}, a, 'r2')).toBe(false);
    expect(log.hasRun({}, b, 'r1')).toBe(false);
    log.close?.();
  });
});

describe('SQLite event log durability', () => {
  it('keeps events and seq across a reopen; seq continues, never reset', async () => {
    const path = freshPath();
    const first = createSqliteEventLog({ path });
    first.append({}, a, { type: 'one', at: 1, runId: 'r1', payload: { text: 'héllo ✓' } });
    first.append({}, a, { type: 'two', at: 2 });
    const before = await first.read({}, a);
    first.close();
    const second = createSqliteEventLog({ path });
    expect(await second.read({}, a)).toEqual(before);
    expect(second.lastSeq({}, a)).toBe(2);
    expect(second.append({}, a, { type: 'three', at: 3 }).seq).toBe(3);
    second.close();
  });

  it('does not rewind seq when old events are deleted, also after a reopen', () => {
    const path = freshPath();
    const database = openSqliteDatabase({ path });
    const log = createSqliteEventLog({ database });
    log.append({}, a, { type: 'one', at: 1 });
    log.append({}, a, { type: 'two', at: 2 });
    database.prepare('DELETE FROM runplane_events').run();
    expect(log.append({}, a, { type: 'three', at: 3 }).seq).toBe(3);
    database.prepare('DELETE FROM runplane_events').run();
    log.close();
    expect(database.open).toBe(true); // a shared database is the caller's to close
    database.close();
    const reopened = createSqliteEventLog({ path });
    expect(reopened.lastSeq({}, a)).toBe(3);
    expect(reopened.append({}, a, { type: 'four', at: 4 }).seq).toBe(4);
    reopened.close();
  });

  it('serves a caught-up follower from its tail and a lagging one from the table', async () => {
    const log = createSqliteEventLog({ path: freshPath(), tail: { events: 4, sessions: 1 } });
    for (let i = 1; i <= 10; i++) log.append({}, a, { type: 't', at: i });
    log.append({}, b, { type: 'other', at: 0 }); // evicts alice's state (one session kept)
    const stop = new AbortController();
    const seen: number[] = [];
    const follower = (async () => {
      for await (const event of log.follow({ signal: stop.signal }, a, { after: 2 })) {
        seen.push(event.seq);
        if (event.seq === 14) stop.abort();
      }
    })();
    for (let i = 11; i <= 14; i++) {
      await new Promise((resolve) => setImmediate(resolve));
      log.append({}, a, { type: 't', at: i });
    }
    await follower;
    expect(seen).toEqual([3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14]);
    log.close();
  });

  it('stores a payload that cannot be serialized as a note instead of failing the append', async () => {
    const log = createSqliteEventLog({ path: freshPath() });
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    log.append({}, a, { type: 'odd', at: 1, payload: cyclic });
    const [stored] = await log.read({}, a);
    expect(Object.keys(stored?.payload ?? {})).toEqual(['unserializable']);
    expect(String(stored?.payload.unserializable)).toMatch(/circular/);
    log.close();
  });

  it('close() ends every follower', async () => {
    const log = createSqliteEventLog({ path: freshPath() });
    const iterator = log.follow({}, a)[Symbol.asyncIterator]();
    const next = iterator.next();
    log.close();
    expect(await next).toEqual({ done: true, value: undefined });
  });

  it('rejects bad options', () => {
    expect(() => createSqliteEventLog({})).toThrow(/INVALID_ARGUMENT/);
    expect(() => createSqliteEventLog({ path: freshPath(), followBatchSize: 0 })).toThrow(
      /followBatchSize/,
    );
  });
});
