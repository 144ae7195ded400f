/**
 * Conformance with Eino ADK's TurnLoop (issue 3, "Conformance"): one test per item. This file:
 * preempts (idle, during planning, parked, delayed, escalated, never reaching a safe point).
 */
import { describe, expect, it } from 'vitest';
import { CancelMode } from '../../src/index.js';
import { createTestLoop, deferred, flush, until } from './helpers.js';

describe('TurnLoop conformance', () => {
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
});
