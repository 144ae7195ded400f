/**
 * Conformance with Eino ADK's TurnLoop (issue 3, "Conformance"): one test per item.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  CancelMode,
  StoreFailedError,
  TurnCancelledError,
  createMemoryCheckpointStore,
  createTurnLoop,
  type CheckpointStore,
  type GenResumeArgs,
} from '../../src/index.js';
import { createSqliteCheckpointStore } from '../../src/stores/sqlite/index.js';
import {
  createTestLoop,
  createTestRuntime,
  deferred,
  flush,
  steppedAgent,
  until,
} from './helpers.js';

describe('TurnLoop conformance', () => {
  it('stop() is idempotent', async () => {
    const { loop, stepped, genInputCalls } = createTestLoop();
    loop.push('a');
    loop.push('b');
    loop.run();
    await until(() => stepped.executions.length === 1, 'turn 1 started');
    loop.stop();
    loop.stop();
    loop.stop({});
    stepped.last().finish();
    const exit = await loop.wait();
    expect(exit.exitReason).toBeUndefined();
    expect(exit.unhandledItems).toEqual(['b']);
    expect(genInputCalls).toHaveLength(1);
    loop.stop(); // after exit: still nothing happens
    expect(await loop.wait()).toBe(exit);
  });

  it('wait() returns the same exit to every caller', async () => {
    const { loop } = createTestLoop();
    const early = loop.wait();
    loop.push('a');
    loop.stop();
    const [first, second] = await Promise.all([early, loop.wait()]);
    expect(first).toBe(second);
    expect(await loop.wait()).toBe(first);
    expect(first.unhandledItems).toEqual(['a']);
  });

  it('items pushed before run() are kept', async () => {
    const { loop, stepped, genInputCalls } = createTestLoop({
      genInput: (items) => {
        genInputCalls.push({ items: [...items], preemptedItems: [], turnId: '' });
        return { input: items.join(','), consumed: items };
      },
    });
    expect(loop.push('a').accepted).toBe(true);
    expect(loop.push('b').accepted).toBe(true);
    loop.run();
    await until(() => stepped.executions.length === 1, 'turn started');
    expect(genInputCalls[0]?.items).toEqual(['a', 'b']);
    expect(stepped.last().input).toBe('a,b');
    loop.stop();
    stepped.last().finish();
    const exit = await loop.wait();
    expect(exit.exitReason).toBeUndefined();
    expect(exit.unhandledItems).toEqual([]);
  });

  it('stop before run() exits without calling genInput and keeps the items as unhandled', async () => {
    const store = createMemoryCheckpointStore();
    const { loop, genInputCalls } = createTestLoop({ store, checkpointId: 'c' });
    loop.push('a');
    loop.push('b');
    loop.stop({ cause: 'never mind' });
    const exit = await loop.wait();
    expect(genInputCalls).toEqual([]);
    expect(exit.unhandledItems).toEqual(['a', 'b']);
    expect(exit.exitReason).toBeUndefined();
    expect(exit.stopCause).toBe('never mind');
    // A loop that never ran never read the checkpoint, so it does not write one either.
    expect(exit.checkpointAttempted).toBe(false);
    expect(await store.get({}, 'c')).toBeUndefined();
    expect(loop.run()).toBe(false);
  });

  it('stop during genInput puts the taken items back in order', async () => {
    const gate = deferred();
    let signal: AbortSignal | undefined;
    const { loop, stepped, prepared } = createTestLoop({
      genInput: async (items, info) => {
        signal = info.signal;
        await gate.promise;
        // A reordering answer that must be ignored: the plan is abandoned.
        return { input: 'x', consumed: [items[2] as string], remaining: [items[1] as string] };
      },
    });
    loop.push('a');
    loop.push('b');
    loop.push('c');
    loop.run();
    await until(() => signal !== undefined, 'genInput called');
    loop.push('d'); // pushed during genInput: stays behind the taken items
    loop.stop();
    expect(signal?.aborted).toBe(true);
    gate.resolve();
    const exit = await loop.wait();
    expect(exit.unhandledItems).toEqual(['a', 'b', 'c', 'd']);
    expect(exit.droppedItems).toEqual([]);
    expect(stepped.executions).toHaveLength(0);
    await flush();
    expect(prepared).toEqual([]); // an abandoned plan goes no further: no prepareAgent
  });

  it('a stop in the same tick as run() calls neither genInput nor prepareAgent', async () => {
    const { loop, genInputCalls, prepared } = createTestLoop();
    loop.run();
    loop.push('a');
    loop.stop(); // the turn was entered; its planning had not begun
    const exit = await loop.wait();
    await flush();
    expect(exit.unhandledItems).toEqual(['a']);
    expect(genInputCalls).toEqual([]);
    expect(prepared).toEqual([]);
  });

  it('preempt while idle cancels nothing and the item runs next turn', async () => {
    const { loop, stepped, runtime } = createTestLoop();
    loop.run();
    await flush();
    const pushed = loop.push('urgent', { preempt: CancelMode.AnySafePoint });
    expect(pushed.accepted).toBe(true);
    await pushed.ack; // nothing to preempt: acknowledged at once
    await until(() => stepped.executions.length === 1, 'turn started');
    expect(stepped.last().input).toBe('urgent');
    stepped.last().safePoint('afterToolCalls'); // no cancel pending: the turn goes on
    await flush();
    expect(stepped.last().done).toBe(false);
    stepped.last().finish();
    loop.stop();
    const exit = await loop.wait();
    expect(exit.exitReason).toBeUndefined();
    const events = await runtime.eventLog.read({}, { ownerId: 'u1', sessionId: 's1' });
    expect(events.filter((e) => e.type === 'run.cancelled')).toEqual([]);
  });

  it('preempt during planning is delivered when that turn starts', async () => {
    const gate = deferred();
    let planning = false;
    const { loop, stepped } = createTestLoop({
      genInput: async (items) => {
        planning = true;
        await gate.promise;
        return { input: items[0], consumed: items.slice(0, 1), remaining: items.slice(1) };
      },
    });
    loop.push('a');
    loop.run();
    await until(() => planning, 'genInput called');
    const pushed = loop.push('urgent', { preempt: CancelMode.AfterToolCalls });
    let acked = false;
    void pushed.ack.then(() => (acked = true));
    await flush();
    expect(acked).toBe(false); // no turn yet to deliver it to
    gate.resolve();
    await until(() => stepped.executions.length === 1, 'turn 1 started');
    await until(() => acked, 'preempt delivered at turn start');
    const first = stepped.last();
    expect(first.input).toBe('a');
    first.safePoint('afterToolCalls'); // the pending preempt lands here
    await until(() => stepped.executions.length === 2, 'turn 2 started');
    expect(first.done).toBe(true);
    expect(stepped.last().input).toBe('urgent');
    stepped.last().finish();
    loop.stop();
    const exit = await loop.wait();
    expect(exit.exitReason).toBeUndefined();
    expect(exit.unhandledItems).toEqual([]);
  });

  /**
   * Turn 1 plans (genInput waits for the test) while `urgent` is pushed with a 100 ms preempt
   * timeout; genInput then takes `planningMs` on the simulated clock before turn 1's run starts.
   */
  async function parkPreempt(planningMs: number) {
    const gate = deferred();
    const offered: string[][] = [];
    const made = createTestLoop({
      genInput: async (items) => {
        offered.push([...items]);
        if (offered.length === 1) await gate.promise;
        return { input: items[0], consumed: items.slice(0, 1), remaining: items.slice(1) };
      },
    });
    made.loop.push('a');
    made.loop.run();
    await until(() => offered.length === 1, 'genInput called for turn 1');
    made.loop.push('urgent', { preempt: CancelMode.AnySafePoint, preemptTimeoutMs: 100 });
    made.clock.increment(planningMs);
    gate.resolve();
    return { ...made, offered };
  }

  it('a preempt parked while the turn plans lands as immediate if its push + preemptTimeoutMs has passed (Eino)', async () => {
    // genInput takes 150 ms: the preempt's deadline (100 ms after its push) has passed.
    const { loop, stepped, runtime, offered } = await parkPreempt(150);
    // Landed as immediate as turn 1's run started: its agent was aborted without waiting for
    // a safe point (none came), and the urgent item runs next.
    await until(() => offered.length === 2, 'turn 2 planned');
    expect(offered[1]).toEqual(['urgent']);
    expect(stepped.executions[0]?.ctx.signal.aborted).toBe(true);
    const events = await runtime.eventLog.read({}, { ownerId: 'u1', sessionId: 's1' });
    const cancelled = events.filter((e) => e.type === 'run.cancelled');
    expect(cancelled.map((e) => (e.payload as { cause?: unknown }).cause)).toEqual(['preempt']);
    await until(() => stepped.executions.length === 2, 'turn 2 started');
    expect(stepped.last().input).toBe('urgent');
    stepped.last().finish();
    loop.stop();
    const exit = await loop.wait();
    expect(exit.exitReason).toBeUndefined();
    expect(exit.unhandledItems).toEqual([]);
  });

  it('a preempt parked while the turn plans, deadline not yet passed, escalates at push + preemptTimeoutMs', async () => {
    const { loop, stepped, clock } = await parkPreempt(60);
    await until(() => stepped.executions.length === 1, 'turn 1 started');
    const first = stepped.last();
    clock.increment(39); // 99 ms after the push: not escalated yet
    await flush();
    expect(first.ctx.signal.aborted).toBe(false);
    clock.increment(1); // 100 ms after the push (40 ms after delivery): escalated
    await until(() => first.ctx.signal.aborted, 'escalated at push + 100 ms');
    await until(() => stepped.executions.length === 2, 'turn 2 started');
    stepped.last().finish();
    loop.stop();
    expect((await loop.wait()).exitReason).toBeUndefined();
  });

  it('a delayed preempt against a turn that has ended does nothing', async () => {
    const { loop, stepped, clock, runtime } = createTestLoop();
    loop.push('a');
    loop.run();
    await until(() => stepped.executions.length === 1, 'turn 1 started');
    const pushed = loop.push('b', { preempt: CancelMode.AnySafePoint, preemptDelayMs: 100 });
    stepped.last().finish(); // turn 1 ends before the delay is over
    await until(() => stepped.executions.length === 2, 'turn 2 started');
    await pushed.ack; // the bound turn ended: nothing to preempt
    const second = stepped.last();
    expect(second.input).toBe('b');
    clock.increment(100);
    await flush();
    second.safePoint('afterChatModel');
    second.safePoint('afterToolCalls');
    await flush();
    expect(second.done).toBe(false); // turn 2 was not preempted
    second.finish();
    loop.stop();
    const exit = await loop.wait();
    expect(exit.exitReason).toBeUndefined();
    const events = await runtime.eventLog.read({}, { ownerId: 'u1', sessionId: 's1' });
    expect(events.filter((e) => e.type === 'run.cancelled')).toEqual([]);
  });

  it('a second preempt (AnySafePoint, 1 ms timeout) escalates a first (AfterChatModel)', async () => {
    const { loop, stepped, clock } = createTestLoop();
    loop.push('a');
    loop.run();
    await until(() => stepped.executions.length === 1, 'turn 1 started');
    const first = stepped.last();
    loop.push('p1', { preempt: CancelMode.AfterChatModel });
    first.safePoint('afterToolCalls'); // does not match AfterChatModel
    await flush();
    expect(first.done).toBe(false);
    loop.push('p2', { preempt: CancelMode.AnySafePoint, preemptTimeoutMs: 1 });
    clock.increment(1); // no safe point within 1 ms: escalates to immediate
    await until(() => first.done, 'turn 1 cancelled');
    expect(first.ctx.signal.aborted).toBe(true);
    await until(() => stepped.executions.length === 2, 'turn 2 started');
    expect(stepped.last().input).toBe('p1');
    stepped.last().finish();
    await until(() => stepped.executions.length === 3, 'turn 3 started');
    stepped.last().finish();
    loop.stop();
    const exit = await loop.wait();
    expect(exit.exitReason).toBeUndefined();
    expect(exit.unhandledItems).toEqual([]);
  });

  it('preempt against an agent that never reaches a safe point lets the turn finish and the item runs next', async () => {
    const { loop, stepped } = createTestLoop();
    loop.push('a');
    loop.run();
    await until(() => stepped.executions.length === 1, 'turn 1 started');
    const first = stepped.last();
    const pushed = loop.push('urgent', { preempt: CancelMode.AnySafePoint });
    await pushed.ack; // delivered: a safe-point cancel is pending on turn 1
    first.finish('finished anyway');
    await until(() => stepped.executions.length === 2, 'turn 2 started');
    expect(stepped.last().input).toBe('urgent');
    stepped.last().finish();
    loop.stop();
    const exit = await loop.wait();
    expect(exit.exitReason).toBeUndefined();
    expect(exit.interruptedItems).toEqual([]);
  });

  it('graceful stop with graceMs escalates and exitReason is a cancel with escalated true', async () => {
    const { loop, stepped, clock } = createTestLoop();
    loop.push('a');
    loop.run();
    await until(() => stepped.executions.length === 1, 'turn started');
    loop.stop({ mode: 'graceful', graceMs: 50, cause: 'deploy' });
    clock.increment(49);
    await flush();
    expect(stepped.last().done).toBe(false);
    clock.increment(1);
    const exit = await loop.wait();
    expect(exit.exitReason).toBeInstanceOf(TurnCancelledError);
    expect(exit.exitReason).toMatchObject({ code: 'RUN_CANCELLED', escalated: true });
    expect(exit.interruptedItems).toEqual(['a']);
    expect(exit.stopCause).toBe('deploy');
  });

  it('idleForMs stops after idleness and a push resets the clock', async () => {
    const { loop, stepped, clock } = createTestLoop();
    let exited = false;
    void loop.wait().then(() => (exited = true));
    loop.run();
    await flush();
    loop.stop({ idleForMs: 100 });
    clock.increment(60);
    await flush();
    expect(exited).toBe(false);
    expect(loop.push('a').accepted).toBe(true); // busy again: the idle clock stops
    await until(() => stepped.executions.length === 1, 'turn started');
    clock.increment(200); // busy time does not count
    await flush();
    expect(exited).toBe(false);
    stepped.last().finish();
    await flush();
    clock.increment(99); // idle again since the turn ended: not yet 100 ms
    await flush();
    expect(exited).toBe(false);
    clock.increment(1);
    const exit = await loop.wait();
    expect(exit.exitReason).toBeUndefined();
    expect(exit.unhandledItems).toEqual([]);
    expect(loop.push('late').accepted).toBe(false);
  });

  it('a later stop() commits an idleForMs stop at once', async () => {
    const { loop } = createTestLoop();
    loop.run();
    await flush();
    loop.stop({ idleForMs: 1_000 });
    loop.stop({ cause: 'now' });
    const exit = await loop.wait();
    expect(exit.stopCause).toBe('now');
  });

  it('the first stop cause wins', async () => {
    const { loop, stepped } = createTestLoop();
    loop.push('a');
    loop.run();
    await until(() => stepped.executions.length === 1, 'turn started');
    loop.stop({ cause: '' }); // empty: does not count
    loop.stop({ cause: 'first' });
    loop.stop({ mode: 'immediate', cause: 'second' });
    const exit = await loop.wait();
    expect(exit.stopCause).toBe('first');
    expect(exit.exitReason).toBeInstanceOf(TurnCancelledError);
  });

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
