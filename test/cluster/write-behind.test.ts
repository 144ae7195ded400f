/**
 * The fenced, ordered write-behind on a real private Redis: one script call per batch, events at
 * `<seq>-0` with their records, a stale holder's batch refused without a trace, a batch that
 * does not follow the stored `seq` refused, a retried batch applied once, and the outbox bound.
 */
import type { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import type { SimulatedClock } from 'xstate';
import { toSessionKeys, type SessionKeys } from '../../src/cluster/keys.js';
import { toBatchKeys } from '../../src/cluster/outbox.js';
import { defineClusterScripts } from '../../src/cluster/scripts.js';
import { isTransientReply } from '../../src/cluster/shipper.js';
import type { RunplaneError } from '../../src/errors.js';
import type { SessionKey } from '../../src/events/event-log.js';
import { skipRedis } from '../redis/redis-server.js';
import { pollUntil, useCluster } from './cluster-helpers.js';

const key: SessionKey = { ownerId: 'alice', sessionId: 's1' };
const other: SessionKey = { ownerId: 'bob', sessionId: 's1' };

/** Script and command calls since the last `CONFIG RESETSTAT`, from `INFO commandstats`. */
async function commandCalls(redis: Redis): Promise<Record<string, number>> {
  const info = await redis.info('commandstats');
  const calls: Record<string, number> = {};
  for (const match of info.matchAll(/^cmdstat_(\w+):calls=(\d+)/gm))
    calls[match[1]!] = Number(match[2]);
  return calls;
}

/** The Stream as `[id, event type]` pairs, and the stored `seq`. */
async function stored(redis: Redis, keys: SessionKeys) {
  const entries = (await redis.xrange(keys.events, '-', '+')) as Array<[string, string[]]>;
  return {
    seq: await redis.get(keys.seq),
    entries: entries.map(([id, fields]) => [id, (JSON.parse(fields[1]!) as { type: string }).type]),
  };
}

const reasonOf = (error: unknown) => [
  (error as RunplaneError).code,
  (error as { reason?: string }).reason,
];

describe.skipIf(skipRedis)('the fenced write-behind', () => {
  const cluster = useCluster();

  it('ships events at <seq>-0 and record ops, one script call per batch, pipelined across sessions', async () => {
    const { keyPrefix, keys, admin, instance } = cluster.scene(key);
    const a = instance('A', { maxBatch: { entries: 100 } });
    await a.acquire(key);
    await a.acquire(other);
    await admin.config('RESETSTAT');
    for (let i = 1; i <= 250; i++) {
      a.eventLog.append({}, key, { type: `t${i}`, at: i, runId: i % 2 === 0 ? 'r2' : 'r1' });
    }
    a.write(key, {
      op: 'run.put',
      runId: 'r1',
      fields: { status: 'RUNNING', input: 'hi', tags: [], at: 1764000000123.5 },
    });
    a.write(key, {
      op: 'run.merge',
      runId: 'r1',
      fields: { status: 'COMPLETED', outcome: { reply: 'ok' }, ignored: undefined },
    });
    a.write(key, { op: 'meta.set', fields: { strategy: 'enqueue', activeRunId: 'r1' } });
    a.write(key, { op: 'meta.del', fields: ['activeRunId'] });
    a.write(key, { op: 'commands.applied', id: '5-0' });
    for (let i = 1; i <= 50; i++) a.eventLog.append({}, other, { type: 'o', at: i });
    await Promise.all([a.flushed(key), a.flushed(other)]);
    const calls = await commandCalls(admin);
    // alice: 255 writes in batches of 100 → 3 calls; bob: 50 writes → 1 call.
    expect((calls.evalsha ?? 0) + (calls.eval ?? 0)).toBe(4);
    expect(calls.xadd).toBe(300);
    const { seq, entries } = await stored(admin, keys);
    expect(seq).toBe('250');
    expect(entries.map(([id]) => id)).toEqual(Array.from({ length: 250 }, (_, i) => `${i + 1}-0`));
    expect(entries.at(-1)?.[1]).toBe('t250');
    expect(await admin.smembers(keys.eventRuns)).toEqual(expect.arrayContaining(['r1', 'r2']));
    expect(await admin.hgetall(keys.run('r1'))).toEqual({
      status: '"COMPLETED"',
      input: '"hi"',
      tags: '[]',
      at: '1764000000123.5',
      outcome: '{"reply":"ok"}',
    });
    expect(await admin.smembers(keys.runs)).toEqual(['r1']);
    expect(await admin.hgetall(keys.meta)).toEqual({ strategy: 'enqueue' });
    expect(await admin.get(keys.commandsApplied)).toBe('5-0');
    expect((await stored(admin, toSessionKeys(other, keyPrefix))).seq).toBe('50');
  });

  it("refuses a stale holder's batch with STALE_FENCE and leaves Stream and records untouched", async () => {
    const { keys, admin, lost, instance } = cluster.scene(key);
    const a = instance('A'); // its clock is still: no renew, no deadline
    const b = instance('B');
    await a.acquire(key);
    a.eventLog.append({}, key, { type: 'a.first', at: 1 });
    await a.flushed(key);
    // The lease expires now (Redis's own expiry), once A's first batch is in: no TTL to race.
    await admin.pexpire(keys.lease, 1);
    await pollUntil(async () => (await admin.exists(keys.lease)) === 0, 'the lease to expire');
    expect(await b.acquire(key)).toEqual({ acquired: true, fence: 2 });
    expect(b.eventLog.lastSeq({}, key)).toBe(1); // the mirror was loaded from Redis
    const before = await stored(admin, keys);
    // A wakes up still believing it holds the session.
    expect(a.eventLog.append({}, key, { type: 'a.late', at: 2 }).seq).toBe(2);
    a.write(key, { op: 'run.put', runId: 'late', fields: { status: 'RUNNING' } });
    a.write(key, { op: 'meta.set', fields: { owner: 'A' } });
    const refused = await a.flushed(key).catch((error: unknown) => error);
    expect(reasonOf(refused)).toEqual(['STALE_FENCE', 'write_refused']);
    expect(lost).toEqual([refused]);
    expect(await stored(admin, keys)).toEqual(before);
    expect(await admin.exists(keys.run('late'), keys.meta, keys.runs)).toBe(0);
    expect(() => a.eventLog.append({}, key, { type: 'a.later', at: 3 })).toThrow(/STALE_FENCE/);
    // B, the holder, goes on from seq 1.
    expect(b.eventLog.append({}, key, { type: 'b.second', at: 4 }).seq).toBe(2);
    await b.flushed(key);
    expect((await stored(admin, keys)).entries).toEqual([
      ['1-0', 'a.first'],
      ['2-0', 'b.second'],
    ]);
  });

  it('refuses a batch with a gap or a duplicate seq, and applies a retried batch once', async () => {
    const { keys, admin, instance } = cluster.scene(key);
    const a = instance('A');
    await a.acquire(key);
    for (let i = 1; i <= 3; i++) a.eventLog.append({}, key, { type: `t${i}`, at: i });
    await a.flushed(key);
    const before = await stored(admin, keys);
    const scripts = defineClusterScripts(admin);
    const batch = (id: string, firstSeq: number, types: string[]) =>
      scripts.ship(toBatchKeys(keys), [
        'A:1',
        '1',
        id,
        keys.tailChannel,
        String(firstSeq),
        String(types.length),
        ...types.map((type, i) => JSON.stringify({ seq: firstSeq + i, type })),
        '0',
        'meta.set',
        '1',
        'touched',
        'yes',
      ]);
    expect(await batch('dup', 3, ['again'])).toEqual(['seq_conflict', 3]);
    expect(await batch('gap', 5, ['skipped'])).toEqual(['seq_conflict', 3]);
    expect(
      await batch('next4', 4, ['x'])
        .then(() => batch('next5', 5, ['y']))
        .then(() => 'sent'),
    ).toBe('sent');
    expect((await stored(admin, keys)).seq).toBe('5');
    // The same batch id again (a retry whose reply was lost): recognised, not applied twice.
    expect(await batch('next5', 5, ['y'])).toEqual(['replayed', 5]);
    expect((await stored(admin, keys)).entries.map(([id]) => id)).toEqual([
      ...before.entries.map(([id]) => id),
      '4-0',
      '5-0',
    ]);
    // A malformed op is refused before anything is written.
    const malformed = await scripts.ship(toBatchKeys(keys), [
      'A:1',
      '1',
      'm',
      keys.tailChannel,
      '6',
      '1',
      '{"seq":6}',
      '0',
      'meta.nope',
      '0',
    ]);
    expect(malformed).toEqual(['bad_batch', 'unknown op meta.nope']);
    // A lease value that names A:1 while the fence key says 2 (a grant A never saw): refused.
    await admin.set(keys.fence, '2');
    expect(await batch('fenced', 6, ['z'])).toEqual(['stale_fence', 2]);
    await admin.set(keys.fence, '1');
    expect((await stored(admin, keys)).seq).toBe('5');
    // The holder's own next batch now conflicts: its mirror says 3. It gives the session up.
    a.eventLog.append({}, key, { type: 't4', at: 4 });
    expect(reasonOf(await a.flushed(key).catch((error: unknown) => error))).toEqual([
      'STALE_FENCE',
      'seq_conflict',
    ]);
    expect(a.fenceOf(key)).toBeUndefined();
  });

  it('retries a batch whose reply timed out, in order, without applying it twice', async () => {
    const { keys, admin, instance } = cluster.scene(key);
    const a = instance('A', {
      redis: cluster.connect({ commandTimeout: 100 }),
      retry: { minMs: 5, maxMs: 20 },
      clock: undefined, // real timers: the retries' backoff
    });
    await a.acquire(key);
    a.eventLog.append({}, key, { type: 'before', at: 0 });
    await a.flushed(key);
    await admin.config('RESETSTAT');
    await admin.call('CLIENT', 'PAUSE', '300', 'WRITE');
    for (let i = 1; i <= 5; i++) a.eventLog.append({}, key, { type: `t${i}`, at: i });
    await a.flushed(key); // sent while paused: timed out, retried until the pause ended
    a.eventLog.append({}, key, { type: 'after', at: 6 });
    await a.flushed(key);
    const { seq, entries } = await stored(admin, keys);
    expect(seq).toBe('7');
    expect(entries.map(([, type]) => type)).toEqual([
      'before',
      't1',
      't2',
      't3',
      't4',
      't5',
      'after',
    ]);
    const calls = await commandCalls(admin);
    expect((calls.evalsha ?? 0) + (calls.eval ?? 0)).toBeGreaterThan(2); // at least one retry
    expect(calls.xadd).toBe(6);
  });

  it('stops a session whose batch the script fails on (not transient): STORE_FAILED once, no retry', async () => {
    const { keys, admin, lost, instance } = cluster.scene(key);
    const a = instance('A', { retry: { minMs: 5, maxMs: 20 } }); // simulated clock: we drive it
    await a.acquire(key);
    a.eventLog.append({}, key, { type: 'before', at: 0 });
    await a.flushed(key);
    // A key of the wrong type where the batch appends its events: XADD fails inside the script.
    await admin.del(keys.events);
    await admin.set(keys.events, 'not a stream');
    await admin.config('RESETSTAT');
    a.eventLog.append({}, key, { type: 't1', at: 1 });
    const failed = await a.flushed(key).catch((error: unknown) => error);
    expect((failed as RunplaneError).code).toBe('STORE_FAILED');
    expect((failed as Error).message).toMatch(/WRONGTYPE/);
    expect(lost.map((error) => error.code)).toEqual(['STORE_FAILED']);
    expect(a.fenceOf(key)).toBeUndefined();
    await pollUntil(async () => (await admin.exists(keys.lease)) === 0, 'the lease to be released');
    // No retry: past many backoffs of the simulated clock, the script was called once.
    for (let i = 0; i < 10; i++) {
      (a.clock as SimulatedClock).increment(20);
      await new Promise((resolve) => setImmediate(resolve));
    }
    // One failed batch (every attempt would be a WRONGTYPE), and one script call besides it:
    // the lease's release.
    expect(await admin.info('errorstats')).toMatch(/^errorstat_WRONGTYPE:count=1\r?$/m);
    const calls = await commandCalls(admin);
    expect((calls.evalsha ?? 0) + (calls.eval ?? 0)).toBe(2);
    expect(lost).toHaveLength(1);
    expect(await admin.get(keys.seq)).toBe('1');
  });

  it("tells Redis's transient answers from the rest by their real replies", async () => {
    const admin = cluster.admin();
    const failure = (call: Promise<unknown>) =>
      call.then(
        () => undefined,
        (error: Error) => error,
      );
    const noScript = await failure(admin.evalsha('0'.repeat(40), 0));
    await admin.set('wt:string', 'not a stream');
    const wrongType = await failure(
      admin.eval("return redis.call('XADD', KEYS[1], '*', 'e', 1)", 1, 'wt:string'),
    );
    const luaError = await failure(admin.eval('return nil + 1', 0));
    expect([noScript, wrongType, luaError].map((error) => error?.name)).toEqual([
      'ReplyError',
      'ReplyError',
      'ReplyError',
    ]);
    expect(isTransientReply(noScript!)).toBe(true);
    expect(isTransientReply(wrongType!)).toBe(false);
    expect(isTransientReply(luaError!)).toBe(false);
    const closed = cluster.connect();
    await closed.quit();
    const connection = await failure(closed.get('x'));
    expect(connection).toBeInstanceOf(Error);
    expect(isTransientReply(connection!)).toBe(true);
  });

  it('ships a write group in one batch, whole even past the batch bound, and nothing of it while open', async () => {
    const { keys, admin, instance } = cluster.scene(key);
    const a = instance('A', { maxBatch: { entries: 2 } });
    await a.acquire(key);
    await admin.config('RESETSTAT');
    a.eventLog.append({}, key, { type: 'before', at: 0 });
    const close = a.openGroup(key);
    for (let i = 1; i <= 5; i++) a.eventLog.append({}, key, { type: `g${i}`, at: i });
    a.write(key, { op: 'commands.applied', id: '7-0' });
    const shipped = a.flushed(key);
    // Only the write before the group can ship while the group is open.
    await pollUntil(async () => (await admin.get(keys.seq)) === '1', 'the write before the group');
    expect((await commandCalls(admin)).xadd).toBe(1);
    close();
    await shipped;
    const calls = await commandCalls(admin);
    // [before], then the group of 6 writes as one batch (without the group: 3 more batches of 2).
    expect((calls.evalsha ?? 0) + (calls.eval ?? 0)).toBe(2);
    expect((await stored(admin, keys)).seq).toBe('6');
    expect(await admin.get(keys.commandsApplied)).toBe('7-0');
  });

  it('stops a session whose outbox passes its bound, with OUTBOX_FULL, and hands the lease back', async () => {
    const { keys, admin, lost, instance } = cluster.scene(key);
    const a = instance('A', { maxOutbox: { entries: 5 } });
    await a.acquire(key);
    for (let i = 1; i <= 5; i++) a.eventLog.append({}, key, { type: 't', at: i });
    expect(() => a.eventLog.append({}, key, { type: 't', at: 6 })).toThrow(/OUTBOX_FULL/);
    expect(lost.map((error) => error.code)).toEqual(['OUTBOX_FULL']);
    expect(a.fenceOf(key)).toBeUndefined();
    await pollUntil(async () => (await admin.exists(keys.lease)) === 0, 'the lease to be released');
    const bytes = instance('B', { maxOutbox: { bytes: 200 } });
    await bytes.acquire(key);
    expect(() =>
      bytes.eventLog.append({}, key, { type: 'big', at: 1, payload: { text: 'x'.repeat(300) } }),
    ).toThrow(/OUTBOX_FULL.*200 bytes/);
  });
});
