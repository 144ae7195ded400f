/**
 * Where runplane's TurnLoop is stricter than Eino's (issue 3): one test per item. The
 * conservation property over random sequences is in conservation.property.test.ts.
 */
import { describe, expect, it } from 'vitest';
import {
  CancelMode,
  TurnCancelledError,
  createMemoryCheckpointStore,
  type CheckpointStore,
} from '../../src/index.js';
import { createTestLoop, decodeStored, deferred, flush, steppedAgent, until } from './helpers.js';

describe('TurnLoop: stricter than Eino', () => {
  it('the buffer is closed before it is taken at exit: no accepted push ever vanishes', async () => {
    const memory = createMemoryCheckpointStore();
    const saving = deferred();
    const release = deferred();
    const store: CheckpointStore = {
      get: (ctx, id) => memory.get(ctx, id),
      delete: (ctx, id) => memory.delete(ctx, id),
      set: async (ctx, id, data) => {
        saving.resolve();
        await release.promise;
        await memory.set(ctx, id, data);
      },
    };
    const { loop, stepped } = createTestLoop({ store, checkpointId: 'c' });
    loop.push('a');
    loop.run();
    await until(() => stepped.executions.length === 1, 'turn started');
    expect(loop.push('b').accepted).toBe(true);
    loop.stop({ mode: 'immediate' });
    // Refused from the moment the stop commits, while the turn unwinds…
    expect(loop.push('c').accepted).toBe(false);
    await saving.promise;
    // …and while the checkpoint with the taken buffer is being written.
    expect(loop.push('d').accepted).toBe(false);
    release.resolve();
    const exit = await loop.wait();
    expect(exit.interruptedItems).toEqual(['a']);
    expect(exit.unhandledItems).toEqual(['b']);
    expect(exit.takeLateItems()).toEqual(['c', 'd']);
    const saved = decodeStored(await memory.get({}, 'c'));
    expect(saved.unhandled).toEqual(['b']);
    expect(saved.interrupted).toEqual(['a']);
  });

  it('stop beats preempt, deterministically, when both hit one turn', async () => {
    for (const order of ['preempt, then stop', 'stop, then preempt'] as const) {
      const { loop, stepped, genInputCalls } = createTestLoop();
      loop.push('a');
      loop.push('b');
      loop.run();
      await until(() => stepped.executions.length === 1, 'turn started');
      const turn = stepped.last();
      let urgent;
      if (order === 'preempt, then stop') {
        urgent = loop.push('urgent', { preempt: CancelMode.AnySafePoint });
        loop.stop({ mode: 'graceful', cause: '' });
      } else {
        loop.stop({ mode: 'graceful', cause: '' });
        urgent = loop.push('urgent', { preempt: CancelMode.AnySafePoint });
      }
      loop.stop({ cause: 'deploy' }); // the first non-empty cause
      await urgent.ack;
      turn.safePoint('afterChatModel'); // both requests are pending here: one cancel lands
      const exit = await loop.wait();
      expect(exit.exitReason, order).toBeInstanceOf(TurnCancelledError);
      // The exit reason tells the stop's story, with its cause, whichever request landed.
      expect(exit.exitReason, order).toMatchObject({
        cancelCause: 'cancel',
        reason: 'turn loop stopped: deploy',
      });
      expect(exit.interruptedItems, order).toEqual(['a']);
      expect(genInputCalls, order).toHaveLength(1); // the loop did not go on to a next turn
      if (order === 'preempt, then stop') {
        expect(urgent.accepted).toBe(true);
        expect(exit.unhandledItems).toEqual(['b', 'urgent']);
        expect(exit.takeLateItems()).toEqual([]);
      } else {
        expect(urgent.accepted).toBe(false);
        expect(exit.unhandledItems).toEqual(['b']);
        expect(exit.takeLateItems()).toEqual(['urgent']);
      }
    }
  });

  it('stop beats preempt even when the stop itself cancels nothing (afterTurn)', async () => {
    const { loop, stepped, genInputCalls } = createTestLoop();
    loop.push('a');
    loop.run();
    await until(() => stepped.executions.length === 1, 'turn started');
    await loop.push('urgent', { preempt: CancelMode.AnySafePoint }).ack;
    loop.stop(); // afterTurn: no cancel of its own, but the loop is closed
    stepped.last().safePoint('afterToolCalls'); // the preempt lands
    const exit = await loop.wait();
    // The cancelled turn's items are not lost as "consumed by a preempted turn" with no successor.
    expect(exit.interruptedItems).toEqual(['a']);
    expect(exit.unhandledItems).toEqual(['urgent']);
    expect(exit.exitReason).toBeInstanceOf(TurnCancelledError);
    expect(genInputCalls).toHaveLength(1);
  });

  it("a turn's run is cancelled and settled before the next turn starts, even if onAgentEvents returns early", async () => {
    const unwind = deferred();
    const slow = steppedAgent({ unwindGate: unwind.promise });
    const order: string[] = [];
    const { loop, runtime } = createTestLoop({
      prepareAgent: (consumed) => {
        order.push(`prepare ${consumed.join(',')}`);
        return slow.agent;
      },
      onAgentEvents: (turn) => {
        order.push(`handler ${turn.consumed.join(',')} returns at once`);
        return undefined;
      },
    });
    loop.push('a');
    loop.push('b');
    loop.run();
    await until(() => slow.executions.length === 1, 'turn 1 started');
    const first = slow.last();
    await until(() => first.ctx.signal.aborted, 'turn 1 cancelled after the early return');
    const run = runtime.runs.find('u1', 's1', first.ctx.runId);
    expect(run?.status).toBe('CANCELLED');
    await flush(20);
    // The agent has not unwound yet: no next turn is planned meanwhile.
    expect(order).toEqual(['prepare a', 'handler a returns at once']);
    expect(slow.executions).toHaveLength(1);
    unwind.resolve();
    await until(() => slow.executions.length === 2, 'turn 2 started');
    expect(first.done).toBe(true);
    expect(order).toEqual([
      'prepare a',
      'handler a returns at once',
      'prepare b',
      'handler b returns at once',
    ]);
    loop.stop({ mode: 'immediate' });
    const exit = await loop.wait();
    expect(exit.unhandledItems).toEqual([]);
  });

  it("a preempted turn's consumed items are handed to the next genInput as preemptedItems when requeuePreempted is set", async () => {
    for (const requeuePreempted of [true, false]) {
      const { loop, stepped, genInputCalls } = createTestLoop({ requeuePreempted });
      loop.push('a');
      loop.run();
      await until(() => stepped.executions.length === 1, 'turn 1 started');
      await loop.push('urgent', { preempt: CancelMode.AfterToolCalls }).ack;
      stepped.last().safePoint('afterToolCalls');
      await until(() => stepped.executions.length === 2, 'turn 2 started');
      if (requeuePreempted) {
        expect(genInputCalls[1]).toMatchObject({ items: ['urgent'], preemptedItems: ['a'] });
        // createTestLoop's genInput consumes the first of [...preemptedItems, ...items].
        expect(stepped.last().input).toBe('a');
      } else {
        expect(genInputCalls[1]).toMatchObject({ items: ['urgent'], preemptedItems: [] });
        expect(stepped.last().input).toBe('urgent');
      }
      loop.stop({ mode: 'immediate' });
      const exit = await loop.wait();
      // With requeue, 'urgent' was offered but kept (remaining): it is unhandled, not lost.
      expect(exit.unhandledItems).toEqual(requeuePreempted ? ['urgent'] : []);
      expect(exit.interruptedItems).toEqual(requeuePreempted ? ['a'] : ['urgent']);
    }
  });
});
