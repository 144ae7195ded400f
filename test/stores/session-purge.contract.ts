/**
 * The contract of a session purge (`SessionPurge`, src/stores/session-purge.ts), shared by
 * SQLite's and the cluster's on Redis: which sessions it lists, that a purge goes in bounded
 * steps until nothing of the session is left, that it touches no other session, and that the id
 * is free again afterwards.
 */
import { describe, expect, it } from 'vitest';
import type { SessionKey } from '../../src/events/event-log.js';
import type { EventLog } from '../../src/events/event-log.js';
import type { RunRecords } from '../../src/stores/run-records.js';
import type { SessionPurge } from '../../src/stores/session-purge.js';
import type { SessionRecords } from '../../src/stores/session-records.js';
import type { SessionStore } from '../../src/stores/session-store.js';

/** A store's purge with the stores it purges. */
export interface PurgeHarness {
  readonly purge: SessionPurge;
  readonly eventLog: EventLog;
  readonly sessions: SessionRecords;
  readonly runs: RunRecords;
  readonly sessionStore: SessionStore;
  /** Before writing a session (a cluster takes its lease). */
  hold(key: SessionKey): Promise<void>;
  /** After writing it: durable, and (a cluster) its lease given back, as once its runs settled. */
  settle(key: SessionKey): Promise<void>;
  /** How many rows or entries of the session the store still holds (0 once purged). */
  left(key: SessionKey): Promise<number>;
  close(): Promise<void>;
}

const ctx = {};

/** A session with `events` events, a history of `messages` messages and two finished runs. */
async function seed(
  h: PurgeHarness,
  key: SessionKey,
  sizes: { events: number; messages: number },
  at = 1,
): Promise<void> {
  await h.hold(key);
  expect(h.sessions.create({ ...key, strategy: 'reject', graceMs: 0, at })).toBeDefined();
  const run = (n: number) => `${key.ownerId}.${key.sessionId}.r${n}`; // run ids are global
  for (const runId of [run(1), run(2)]) {
    h.runs.create({ runId, ...key, input: 'hi', at });
    h.runs.finish(runId, { status: 'COMPLETED' }, at);
  }
  for (let i = 0; i < sizes.events; i++) {
    h.eventLog.append(ctx, key, { type: 'run.status', runId: run(1), at });
  }
  const messages = Array.from({ length: sizes.messages }, (_, i) => ({
    role: 'user' as const,
    content: `message ${i}`,
  }));
  await h.sessionStore.append(ctx, key, messages);
  await h.settle(key);
}

async function markDeleted(h: PurgeHarness, key: SessionKey, at: number): Promise<void> {
  await h.hold(key);
  expect(h.sessions.markDeleted(key.ownerId, key.sessionId, at)).toBe(true);
  await h.settle(key);
}

/** Steps until the purge says the session is gone. @returns the steps taken */
async function purgeAll(h: PurgeHarness, key: SessionKey, batchSize: number): Promise<number> {
  for (let steps = 1; steps <= 1_000; steps++) {
    const result = await h.purge.purgeStep(key, batchSize);
    expect(result).not.toBe('busy');
    if (result === true) return steps;
  }
  throw new Error('the purge never ended');
}

/** Runs the contract against `make`'s harnesses (a fresh one per test). */
export function sessionPurgeContract(name: string, make: () => Promise<PurgeHarness>): void {
  describe(`SessionPurge contract: ${name}`, () => {
    const a = { ownerId: 'alice', sessionId: 'a' };
    const b = { ownerId: 'alice', sessionId: 'b' };
    const c = { ownerId: 'bob', sessionId: 'a' };

    it('lists deleted sessions, earliest deletion first, and no live one', async () => {
      const h = await make();
      try {
        for (const key of [a, b, c]) await seed(h, key, { events: 1, messages: 1 });
        expect(await h.purge.deleted(10)).toEqual([]);
        await markDeleted(h, c, 20);
        await markDeleted(h, a, 30);
        expect(await h.purge.deleted(10)).toEqual([c, a]);
        expect(await h.purge.deleted(1)).toEqual([c]);
      } finally {
        await h.close();
      }
    });

    it('deletes a session in bounded steps until nothing is left, and no other session', async () => {
      const h = await make();
      try {
        await seed(h, a, { events: 25, messages: 12 });
        await seed(h, b, { events: 3, messages: 2 });
        const bBefore = await h.left(b);
        await markDeleted(h, a, 5);
        expect(await h.left(a)).toBeGreaterThan(25 + 12);

        let steps = 0;
        const left: number[] = [await h.left(a)];
        for (;;) {
          const result = await h.purge.purgeStep(a, 4);
          steps++;
          left.push(await h.left(a));
          if (result === true) break;
          expect(result).toBe(false);
          expect(steps).toBeLessThan(100);
        }
        // At most 4 rows or entries per step: 25 events alone take 7 steps.
        expect(steps).toBeGreaterThanOrEqual(Math.ceil(25 / 4) + Math.ceil(12 / 4));
        for (let i = 1; i < left.length; i++) {
          expect(left[i]!).toBeLessThanOrEqual(left[i - 1]!);
          expect(left[i - 1]! - left[i]!).toBeLessThanOrEqual(4 + 3); // a step, or the last small keys
        }
        expect(await h.left(a)).toBe(0);
        expect(await h.purge.deleted(10)).toEqual([]);
        expect(await h.left(b)).toBe(bBefore);
        expect(await h.eventLog.read(ctx, b)).toHaveLength(3);
        expect(await h.sessionStore.load(ctx, b)).toHaveLength(2);
      } finally {
        await h.close();
      }
    });

    it('frees the id: the session can be made again, empty', async () => {
      const h = await make();
      try {
        await seed(h, a, { events: 2, messages: 1 });
        await markDeleted(h, a, 5);
        await purgeAll(h, a, 500);
        await h.hold(a);
        expect(h.sessions.create({ ...a, strategy: 'reject', graceMs: 0, at: 9 })).toMatchObject({
          createdAt: 9,
        });
        await h.settle(a);
        expect(await h.eventLog.read(ctx, a)).toEqual([]);
        expect(await h.sessionStore.load(ctx, a)).toEqual([]);
        expect(await h.purge.deleted(10)).toEqual([]);
      } finally {
        await h.close();
      }
    });
  });
}
