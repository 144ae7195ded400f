/**
 * The RunRecords contract (docs/architecture.md, "Event log and HTTP service", "Cluster on
 * Redis"): one suite, run against SQLite and the cluster's Redis store.
 */
import { describe, expect, it } from 'vitest';
import type { RunRecords } from '../../src/stores/run-records.js';
import { useStoreHarness, type StoreHarness } from './record-store-contract.js';

const a = { ownerId: 'alice', sessionId: 's1' };

/** Runs the contract against the harnesses `open` makes (one per test). */
export function describeRunRecordsContract(
  name: string,
  open: () => Promise<StoreHarness<RunRecords>>,
): void {
  describe(`RunRecords contract: ${name}`, () => {
    const opened = useStoreHarness(open);
    const setup = async () => {
      const runs = await opened();
      await runs.create({ runId: 'r1', ...a, input: 'hello', at: 1 });
      return runs;
    };

    it('follows status changes; the first terminal status and outcome win', async () => {
      const runs = await setup();
      expect(await runs.setStatus('r1', 'QUEUED', 2)).toBe(true);
      expect(await runs.setStatus('r1', 'RUNNING', 3)).toBe(true);
      expect(await runs.setStatus('r1', 'CANCELLED', 4)).toBe(true);
      expect(await runs.setStatus('r1', 'FAILED', 5)).toBe(false);
      expect(await runs.finish('r1', { status: 'COMPLETED', reason: 'completed' }, 6)).toBe(false);
      expect(await runs.finish('r1', { status: 'CANCELLED', cause: 'cancel' }, 7)).toBe(true);
      expect(await runs.finish('r1', { status: 'CANCELLED', cause: 'other' }, 8)).toBe(false);
      expect(await runs.get('alice', 'r1')).toEqual({
        runId: 'r1',
        ...a,
        status: 'CANCELLED',
        input: 'hello',
        createdAt: 1,
        updatedAt: 7,
        endedAt: 4,
        outcome: { status: 'CANCELLED', cause: 'cancel' },
      });
    });

    it('finish of an unfinished run sets its terminal status; of an unknown run changes nothing', async () => {
      const runs = await setup();
      expect(await runs.finish('nope', { status: 'COMPLETED' }, 2)).toBe(false);
      expect(await runs.setStatus('nope', 'RUNNING', 2)).toBe(false);
      const outcome = { status: 'COMPLETED', reason: 'completed', reply: 'done' } as const;
      expect(await runs.finish('r1', outcome, 9)).toBe(true);
      expect(await runs.get('alice', 'r1')).toMatchObject({
        status: 'COMPLETED',
        endedAt: 9,
        updatedAt: 9,
        outcome,
      });
      expect(await runs.get('alice', 'nope')).toBeUndefined();
    });

    it('is owner-checked and lists unfinished runs oldest first', async () => {
      const runs = await setup();
      await runs.create({ runId: 'r2', ...a, input: 'two', at: 2 });
      await runs.create({ runId: 'r3', ...a, input: 'three', at: 3 });
      await runs.setStatus('r2', 'RUNNING', 4);
      await runs.setStatus('r3', 'COMPLETED', 5);
      expect(await runs.get('bob', 'r1')).toBeUndefined();
      expect((await runs.listUnfinished()).map((r) => [r.runId, r.status])).toEqual([
        ['r1', 'CREATED'],
        ['r2', 'RUNNING'],
      ]);
    });

    it('round-trips text and times exactly: unicode, JSON-looking input, the largest safe ms', async () => {
      const runs = await setup();
      const at = Number.MAX_SAFE_INTEGER - 1;
      const input = '[] {} "quoted" \\ ünïcødé 🙂 \n 12345678901234567890';
      await runs.create({ runId: 'big', ...a, input, at });
      const error = 'x'.repeat(10_000);
      await runs.finish(
        'big',
        { status: 'FAILED', error, escalated: true, unsettled: false },
        at + 1,
      );
      expect(await runs.get('alice', 'big')).toEqual({
        runId: 'big',
        ...a,
        status: 'FAILED',
        input,
        createdAt: at,
        updatedAt: at + 1,
        endedAt: at + 1,
        outcome: { status: 'FAILED', error, escalated: true, unsettled: false },
      });
    });
  });
}
