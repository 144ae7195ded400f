/**
 * The SessionRecords contract (docs/architecture.md, §9a, §9b, "Cluster on Redis"): one suite,
 * run against SQLite and the cluster's Redis store.
 */
import { describe, expect, it } from 'vitest';
import type { SessionRecords } from '../../src/stores/session-records.js';
import { useStoreHarness, type StoreHarness } from './record-store-contract.js';

const a = { ownerId: 'alice', sessionId: 's1' };

/** Runs the contract against the harnesses `open` makes (one per test). */
export function describeSessionRecordsContract(
  name: string,
  open: () => Promise<StoreHarness<SessionRecords>>,
): void {
  describe(`SessionRecords contract: ${name}`, () => {
    const setup = useStoreHarness(open);

    it('creates, finds by owner only, updates, and refuses a duplicate id', async () => {
      const sessions = await setup();
      const created = await sessions.create({ ...a, strategy: 'enqueue', graceMs: 5000, at: 10 });
      expect(created).toEqual({
        ...a,
        mode: 'runs',
        strategy: 'enqueue',
        graceMs: 5000,
        approvalTimeoutMs: undefined,
        failover: 'mark',
        createdAt: 10,
        updatedAt: 10,
      });
      expect(await sessions.get('alice', 's1')).toEqual(created);
      expect(
        await sessions.create({ ...a, strategy: 'reject', graceMs: 1, at: 11 }),
      ).toBeUndefined();
      expect(await sessions.get('bob', 's1')).toBeUndefined();
      expect(await sessions.update('alice', 's1', { strategy: 'preempt' }, 20)).toMatchObject({
        strategy: 'preempt',
        graceMs: 5000,
        updatedAt: 20,
      });
      expect(await sessions.update('bob', 's1', { strategy: 'reject' }, 21)).toBeUndefined();
      expect(await sessions.update('alice', 's1', { approvalTimeoutMs: 900 }, 22)).toMatchObject({
        strategy: 'preempt',
        approvalTimeoutMs: 900,
      });
      expect(await sessions.get('alice', 's1')).toMatchObject({
        strategy: 'preempt',
        approvalTimeoutMs: 900,
        createdAt: 10,
        updatedAt: 22,
      });
    });

    it('keeps the failover policy: mark by default, resume when asked, changed by update', async () => {
      const sessions = await setup();
      await sessions.create({ ...a, strategy: 'enqueue', graceMs: 5000, at: 10 });
      const resumed = await sessions.create({
        ownerId: 'alice',
        sessionId: 's2',
        strategy: 'enqueue',
        graceMs: 5000,
        failover: 'resume',
        at: 11,
      });
      expect(resumed?.failover).toBe('resume');
      expect((await sessions.get('alice', 's2'))?.failover).toBe('resume');
      expect(await sessions.update('alice', 's1', { failover: 'resume' }, 12)).toMatchObject({
        failover: 'resume',
        strategy: 'enqueue',
      });
      expect(await sessions.update('alice', 's2', { graceMs: 7 }, 13)).toMatchObject({
        failover: 'resume',
        graceMs: 7,
      });
      expect(await sessions.update('alice', 's2', { failover: 'mark' }, 14)).toMatchObject({
        failover: 'mark',
      });
      expect((await sessions.get('alice', 's1'))?.failover).toBe('resume');
      expect((await sessions.get('alice', 's2'))?.failover).toBe('mark');
    });

    it('lists newest first (createdAt, then id, descending) in pages after a cursor, and counts', async () => {
      const sessions = await setup();
      const made = [
        ['s1', 5],
        ['s2', 7],
        ['s3', 7],
        ['s4', 9],
        ['s0', 7],
      ] as const;
      for (const [sessionId, at] of made) {
        await sessions.create({ ownerId: 'alice', sessionId, strategy: 'enqueue', graceMs: 1, at });
      }
      await sessions.create({
        ownerId: 'bob',
        sessionId: 'b1',
        strategy: 'enqueue',
        graceMs: 1,
        at: 8,
      });
      const ids = async (after?: { createdAt: number; sessionId: string }, limit = 10) =>
        (await sessions.list('alice', { after, limit })).map((s) => s.sessionId);
      expect(await ids()).toEqual(['s4', 's3', 's2', 's0', 's1']);
      expect(await ids(undefined, 2)).toEqual(['s4', 's3']);
      expect(await ids({ createdAt: 7, sessionId: 's3' }, 2)).toEqual(['s2', 's0']);
      expect(await ids({ createdAt: 7, sessionId: 's0' })).toEqual(['s1']);
      expect(await ids({ createdAt: 5, sessionId: 's1' })).toEqual([]);
      expect(await sessions.count('alice')).toBe(5);
      expect(await sessions.count('bob')).toBe(1);
      expect(await sessions.count('carol')).toBe(0);
    });

    it('a deleted session is found by no method, is not counted, and keeps its id', async () => {
      const sessions = await setup();
      await sessions.create({ ...a, strategy: 'enqueue', graceMs: 1, at: 1 });
      await sessions.create({
        ownerId: 'alice',
        sessionId: 's2',
        strategy: 'enqueue',
        graceMs: 1,
        at: 2,
      });
      expect(await sessions.markDeleted('alice', 's1', 3)).toBe(true);
      expect(await sessions.markDeleted('alice', 's1', 4)).toBe(false);
      expect(await sessions.markDeleted('bob', 's2', 4)).toBe(false);
      expect(await sessions.get('alice', 's1')).toBeUndefined();
      expect(await sessions.update('alice', 's1', { graceMs: 5 }, 5)).toBeUndefined();
      expect((await sessions.list('alice', { limit: 10 })).map((s) => s.sessionId)).toEqual(['s2']);
      expect(await sessions.count('alice')).toBe(1);
      expect(
        await sessions.create({ ...a, strategy: 'enqueue', graceMs: 1, at: 6 }),
      ).toBeUndefined();
    });

    it('keeps the mode and lists live loop sessions of every owner, oldest first', async () => {
      const sessions = await setup();
      const make = (ownerId: string, sessionId: string, mode: 'runs' | 'loop', at: number) =>
        sessions.create({ ownerId, sessionId, mode, strategy: 'enqueue', graceMs: 1, at });
      expect((await make('bob', 'l2', 'loop', 20))?.mode).toBe('loop');
      await make('alice', 'r1', 'runs', 5);
      await make('alice', 'l1', 'loop', 10);
      await make('alice', 'l3', 'loop', 30);
      expect((await sessions.get('alice', 'r1'))?.mode).toBe('runs');
      await sessions.markDeleted('alice', 'l3', 40);
      expect(await sessions.listLoops()).toEqual([
        { ownerId: 'alice', sessionId: 'l1' },
        { ownerId: 'bob', sessionId: 'l2' },
      ]);
    });

    it('marks which loop sessions owe an answer: none at creation, set and cleared, loops only', async () => {
      const sessions = await setup();
      const make = (sessionId: string, mode: 'runs' | 'loop', at: number) =>
        sessions.create({ ownerId: 'alice', sessionId, mode, strategy: 'enqueue', graceMs: 1, at });
      await make('l1', 'loop', 10);
      await make('l2', 'loop', 20);
      await make('r1', 'runs', 30);
      expect(await sessions.listLoops({ owing: true })).toEqual([]);
      await sessions.markLoopOwes('alice', 'l2', true);
      await sessions.markLoopOwes('alice', 'l1', true);
      await sessions.markLoopOwes('alice', 'r1', true); // not a loop: ignored
      await sessions.update('alice', 'l1', { graceMs: 5 }, 35); // a change keeps the mark
      expect(await sessions.listLoops({ owing: true })).toEqual([
        { ownerId: 'alice', sessionId: 'l1' },
        { ownerId: 'alice', sessionId: 'l2' },
      ]);
      await sessions.markLoopOwes('alice', 'l1', false);
      await sessions.markDeleted('alice', 'l2', 40);
      expect(await sessions.listLoops({ owing: true })).toEqual([]);
      expect(await sessions.listLoops()).toEqual([{ ownerId: 'alice', sessionId: 'l1' }]);
    });

    it('round-trips ids and times exactly: unicode and braces in ids, the largest safe ms', async () => {
      const sessions = await setup();
      const at = Number.MAX_SAFE_INTEGER;
      const key = { ownerId: 'ö{w}n:er', sessionId: '}s/1🙂' };
      const created = await sessions.create({
        ...key,
        strategy: 'interrupt',
        graceMs: 2 ** 40,
        at,
      });
      expect(created).toMatchObject({ ...key, createdAt: at, graceMs: 2 ** 40 });
      expect(await sessions.get(key.ownerId, key.sessionId)).toEqual(created);
      expect(await sessions.list(key.ownerId, { limit: 1 })).toEqual([created]);
    });
  });
}
