/**
 * Conformance with Eino ADK's TurnLoop (issue 3, "Conformance"): one test per item. This file:
 * checkpoints (the SQLite round trip, a failing store, skipCheckpoint).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  StoreFailedError,
  TurnCancelledError,
  createMemoryCheckpointStore,
  createTurnLoop,
  type CheckpointStore,
  type GenResumeArgs,
} from '../../src/index.js';
import { createSqliteCheckpointStore } from '../../src/stores/sqlite/index.js';
import { createTestLoop, createTestRuntime, steppedAgent, until } from './helpers.js';

describe('TurnLoop conformance', () => {
  describe('with a SQLite store', () => {
    let dir: string | undefined;
    afterEach(() => {
      if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
      dir = undefined;
    });

    it('a checkpoint round trip through SQLite across two loops with one checkpointId, with genResume receiving interrupted, unhandled and new items', async () => {
      dir = mkdtempSync(join(tmpdir(), 'runplane-turnloop-'));
      const filename = join(dir, 'checkpoints.db');
      const { runtime, clock } = createTestRuntime();

      // First life: turn 1 is stopped at a safe point with agent state; 'b', 'c' are buffered.
      const store1 = createSqliteCheckpointStore({ filename });
      const agent1 = steppedAgent();
      const loop1 = createTurnLoop<string>({
        runtime,
        ownerId: 'u1',
        sessionId: 's1',
        store: store1,
        checkpointId: 'chat-1',
        genInput: (items) => ({
          input: items[0],
          consumed: items.slice(0, 1),
          remaining: items.slice(1),
        }),
        prepareAgent: () => agent1.agent,
      });
      loop1.push('a');
      loop1.push('b');
      loop1.run();
      await until(() => agent1.executions.length === 1, 'turn 1 started');
      loop1.push('c');
      loop1.stop({ mode: 'graceful', cause: 'restart' });
      agent1.last().safePoint('afterToolCalls', { step: 3 });
      const exit1 = await loop1.wait();
      expect(exit1.exitReason).toBeInstanceOf(TurnCancelledError);
      expect(exit1.interruptedItems).toEqual(['a']);
      expect(exit1.unhandledItems).toEqual(['b', 'c']);
      expect(exit1.checkpointAttempted).toBe(true);
      expect(exit1.checkpointError).toBeUndefined();
      store1.close();

      // Second life, a new connection to the same file: genResume gets all three kinds of items.
      const store2 = createSqliteCheckpointStore({ filename });
      const agent2 = steppedAgent();
      const resumes: GenResumeArgs<string>[] = [];
      const loop2 = createTurnLoop<string>({
        runtime,
        ownerId: 'u1',
        sessionId: 's1',
        store: store2,
        checkpointId: 'chat-1',
        genInput: (items) => ({
          input: items[0],
          consumed: items.slice(0, 1),
          remaining: items.slice(1),
        }),
        genResume: (args) => {
          resumes.push(args);
          const all = [...args.interrupted, ...args.unhandled, ...args.newItems];
          return {
            input: { resume: args.agentState, items: all.slice(0, 1) },
            consumed: all.slice(0, 1),
            remaining: all.slice(1),
          };
        },
        prepareAgent: () => agent2.agent,
      });
      loop2.push('d');
      loop2.run();
      loop2.push('e'); // still before the resume turn is planned (the load is pending)
      await until(() => agent2.executions.length === 1, 'resume turn started');
      expect(resumes).toHaveLength(1);
      expect(resumes[0]).toMatchObject({
        interrupted: ['a'],
        unhandled: ['b', 'c'],
        newItems: ['d', 'e'],
        agentState: { step: 3 },
        turnId: 'turn-2',
      });
      expect(agent2.last().input).toEqual({ resume: { step: 3 }, items: ['a'] });
      agent2.last().finish();
      // A successful resumed turn deletes the consumed checkpoint.
      await until(() => agent2.executions.length === 2, 'turn 3 started');
      expect(await store2.get({}, 'chat-1')).toBeUndefined();
      expect(agent2.last().input).toBe('b');
      loop2.stop({ mode: 'immediate' });
      clock.increment(0);
      const exit2 = await loop2.wait();
      expect(exit2.interruptedItems).toEqual(['b']);
      expect(exit2.unhandledItems).toEqual(['c', 'd', 'e']);
      expect(exit2.checkpointAttempted).toBe(true);
      expect(await store2.get({}, 'chat-1')).toBeInstanceOf(Uint8Array);
      store2.close();
    });
  });

  it('store.set failing → checkpointAttempted true, checkpointError set, exitReason unchanged', async () => {
    const memory = createMemoryCheckpointStore();
    const failing: CheckpointStore = {
      get: (ctx, id) => memory.get(ctx, id),
      set: () => Promise.reject(new Error('disk full')),
      delete: (ctx, id) => memory.delete(ctx, id),
    };
    const { loop, stepped } = createTestLoop({ store: failing, checkpointId: 'c' });
    loop.push('a');
    loop.push('b');
    loop.run();
    await until(() => stepped.executions.length === 1, 'turn started');
    loop.stop({ mode: 'immediate' });
    const exit = await loop.wait();
    expect(exit.exitReason).toBeInstanceOf(TurnCancelledError);
    expect(exit.checkpointAttempted).toBe(true);
    expect(exit.checkpointError).toBeInstanceOf(StoreFailedError);
    expect(exit.checkpointError).toMatchObject({ code: 'STORE_FAILED', operation: 'set' });
    expect((exit.checkpointError as Error).cause).toEqual(new Error('disk full'));
    expect(exit.interruptedItems).toEqual(['a']);
    expect(exit.unhandledItems).toEqual(['b']);
  });

  it('skipCheckpoint saves nothing', async () => {
    const store = createMemoryCheckpointStore();
    const { loop, stepped } = createTestLoop({ store, checkpointId: 'c' });
    loop.push('a');
    loop.push('b');
    loop.run();
    await until(() => stepped.executions.length === 1, 'turn started');
    loop.stop({ mode: 'immediate', skipCheckpoint: true });
    loop.stop({ skipCheckpoint: false }); // sticky
    const exit = await loop.wait();
    expect(exit.checkpointAttempted).toBe(false);
    expect(exit.checkpointError).toBeUndefined();
    expect(exit.interruptedItems).toEqual(['a']);
    expect(exit.unhandledItems).toEqual(['b']);
    expect(await store.get({}, 'c')).toBeUndefined();
  });
});
