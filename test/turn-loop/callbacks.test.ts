/**
 * TurnLoop behaviour beyond the named lists: turn-context signals, callback failures,
 * dropped items.
 */
import { describe, expect, it } from 'vitest';
import { CancelMode, TurnCancelledError, type TurnContext } from '../../src/index.js';
import { createTestLoop, deferred, flush, steppedAgent, until } from './helpers.js';

describe('TurnLoop turn context', () => {
  it('preempted and stopped abort only when that request contributed to the turn’s cancellation', async () => {
    const turns: TurnContext<string>[] = [];
    const { loop, stepped } = createTestLoop({
      onAgentEvents: async (turn, events) => {
        turns.push(turn);
        for await (const _ of events) void _;
      },
    });
    loop.push('a');
    loop.run();
    await until(() => turns.length === 1, 'turn 1 started');
    const [first] = turns as [TurnContext<string>];
    loop.stop({ mode: 'immediate', cause: 'bye' }); // the stop cancels first
    await flush(1); // signals abort right after the loop step, so their listeners may push
    expect(first.stopped.aborted).toBe(true);
    expect(first.stopCause).toBe('bye');
    const exit = await loop.wait();
    expect(first.preempted.aborted).toBe(false);
    expect(exit.exitReason).toBeInstanceOf(TurnCancelledError);

    const second = createTestLoop({
      onAgentEvents: async (turn, events) => {
        turns.push(turn);
        for await (const _ of events) void _;
      },
    });
    second.loop.push('a');
    second.loop.run();
    await until(() => turns.length === 2, 'second loop turn started');
    const turn = turns[1] as TurnContext<string>;
    await second.loop.push('p1', { preempt: CancelMode.AnySafePoint }).ack;
    expect(turn.preempted.aborted).toBe(true);
    second.loop.stop(); // afterTurn: cancels nothing
    expect(turn.stopped.aborted).toBe(false);
    second.stepped.last().safePoint('afterToolCalls');
    await second.loop.wait();
    expect(turn.stopped.aborted).toBe(false);
    void stepped;
  });
});

describe('TurnLoop callbacks', () => {
  it('items genInput neither consumes nor keeps are reported as dropped', async () => {
    const { loop, stepped } = createTestLoop({
      genInput: (items) => ({
        input: items[0],
        consumed: items.slice(0, 1),
        remaining: items.filter((i) => i.startsWith('keep')),
      }),
    });
    loop.push('a');
    loop.push('spam');
    loop.push('keep-1');
    loop.run();
    await until(() => stepped.executions.length === 1, 'turn started');
    loop.stop({ mode: 'immediate' });
    const exit = await loop.wait();
    expect(exit.droppedItems).toEqual(['spam']);
    expect(exit.unhandledItems).toEqual(['keep-1']);
    expect(exit.interruptedItems).toEqual(['a']);
  });

  it('genInput answering an item it was not offered ends the loop with INVALID_ARGUMENT and keeps the items in order', async () => {
    const { loop } = createTestLoop({
      genInput: () => ({ input: 1, consumed: ['ghost'] }),
    });
    loop.push('a');
    loop.push('b');
    loop.run();
    const exit = await loop.wait();
    expect(exit.exitReason).toMatchObject({
      code: 'INVALID_ARGUMENT',
      field: 'genInput().consumed',
    });
    expect(exit.unhandledItems).toEqual(['a', 'b']);
  });

  it('genInput consuming nothing runs no turn; the next push plans again', async () => {
    let calls = 0;
    const { loop, stepped } = createTestLoop({
      genInput: (items) => {
        calls++;
        return items.length < 2
          ? { input: undefined, consumed: [], remaining: items }
          : { input: items.join('+'), consumed: items };
      },
    });
    loop.push('a');
    loop.run();
    await flush();
    expect(calls).toBe(1);
    expect(stepped.executions).toHaveLength(0);
    loop.push('b');
    await until(() => stepped.executions.length === 1, 'turn started');
    expect(calls).toBe(2);
    expect(stepped.last().input).toBe('a+b');
    stepped.last().finish();
    loop.stop();
    expect((await loop.wait()).unhandledItems).toEqual([]);
  });

  it('prepareAgent throwing, or returning no agent, ends the loop with that error; items go back in order', async () => {
    const broken = new Error('no model');
    const first = createTestLoop({
      prepareAgent: () => {
        throw broken;
      },
    });
    first.loop.push('a');
    first.loop.push('b');
    first.loop.run();
    const exit = await first.loop.wait();
    expect(exit.exitReason).toBe(broken);
    expect(exit.unhandledItems).toEqual(['a', 'b']);

    const second = createTestLoop({ prepareAgent: () => ({}) as never });
    second.loop.push('a');
    second.loop.run();
    expect((await second.loop.wait()).exitReason).toMatchObject({
      code: 'INVALID_ARGUMENT',
      field: 'prepareAgent()',
    });
  });

  it('a failing run ends the loop with its error (default onAgentEvents); a custom handler may swallow it', async () => {
    const { loop, stepped } = createTestLoop();
    loop.push('a');
    loop.push('b');
    loop.run();
    await until(() => stepped.executions.length === 1, 'turn started');
    const failure = new Error('model down');
    stepped.last().fail(failure);
    const exit = await loop.wait();
    expect(exit.exitReason).toBe(failure);
    expect(exit.unhandledItems).toEqual(['b']);
    expect(exit.interruptedItems).toEqual([]);

    const lenient = createTestLoop({
      onAgentEvents: async (_turn, events) => {
        for await (const _ of events) void _;
        return undefined;
      },
    });
    lenient.loop.push('a');
    lenient.loop.push('b');
    lenient.loop.run();
    await until(() => lenient.stepped.executions.length === 1, 'turn 1 started');
    lenient.stepped.last().fail(failure);
    await until(() => lenient.stepped.executions.length === 2, 'the loop went on');
    lenient.stepped.last().finish();
    lenient.loop.stop();
    expect((await lenient.loop.wait()).exitReason).toBeUndefined();
  });

  it.each([undefined, null])(
    'an agent that throws %s still fails the loop (default onAgentEvents)',
    async (thrown) => {
      const { loop, stepped } = createTestLoop();
      loop.push('a');
      loop.push('b');
      loop.run();
      await until(() => stepped.executions.length === 1, 'turn started');
      stepped.last().fail(thrown);
      const exit = await loop.wait();
      expect(exit.exitReason).toBeInstanceOf(Error);
      expect(String(exit.exitReason)).toContain(`threw ${String(thrown)}`);
      expect(exit.unhandledItems).toEqual(['b']);
    },
  );

  it('onAgentEvents returning or throwing an error ends the loop with it', async () => {
    const handlerError = new Error('bad event');
    const { loop, stepped } = createTestLoop({
      onAgentEvents: async () => {
        await Promise.resolve();
        throw handlerError;
      },
    });
    loop.push('a');
    loop.run();
    const exit = await loop.wait();
    expect(exit.exitReason).toBe(handlerError);
    expect(stepped.executions.every((e) => e.done)).toBe(true);
  });

  it("a turn cancelled from outside the loop ends it with the turn's TurnCancelledError", async () => {
    const { loop, stepped, runtime } = createTestLoop();
    loop.push('a');
    loop.run();
    await until(() => stepped.executions.length === 1, 'turn started');
    expect(runtime.runs.cancel('u1', 's1', stepped.last().ctx.runId)).toBe('accepted');
    const exit = await loop.wait();
    expect(exit.exitReason).toBeInstanceOf(TurnCancelledError);
    expect(exit.exitReason).toMatchObject({ turnId: 'turn-1', cancelCause: 'cancel' });
    expect(exit.interruptedItems).toEqual(['a']);
  });

  it('a stop during a requeued plan gives the preempted items back before the buffer', async () => {
    const gate = deferred();
    let plans = 0;
    const { loop, stepped } = createTestLoop({
      requeuePreempted: true,
      genInput: async (items, info) => {
        plans++;
        if (plans === 2) await gate.promise;
        const all = [...info.preemptedItems, ...items];
        return { input: all[0], consumed: all.slice(0, 1), remaining: all.slice(1) };
      },
    });
    loop.push('a');
    loop.run();
    await until(() => stepped.executions.length === 1, 'turn 1 started');
    await loop.push('urgent', { preempt: CancelMode.AnySafePoint }).ack;
    stepped.last().safePoint('afterChatModel');
    await until(() => plans === 2, 'second plan started');
    loop.stop();
    gate.resolve();
    const exit = await loop.wait();
    expect(exit.unhandledItems).toEqual(['a', 'urgent']);
  });

  it('a turn whose run cannot be created (runtime shutting down) ends the loop; its items are unhandled', async () => {
    const { loop, runtime } = createTestLoop();
    await runtime.shutdown({ graceMs: 0 });
    loop.push('a');
    loop.push('b');
    loop.run();
    const exit = await loop.wait();
    expect(exit.exitReason).toMatchObject({ code: 'SHUTTING_DOWN' });
    expect(exit.unhandledItems).toEqual(['a', 'b']);
    expect(exit.interruptedItems).toEqual([]);
  });

  it('when the run cannot be created, the plan is undone: every item back in push order, none dropped', async () => {
    const { loop, runtime } = createTestLoop({
      // Consumes the second item, keeps the first, drops the third.
      genInput: (items) => ({
        input: items[1],
        consumed: items.slice(1, 2),
        remaining: items.slice(0, 1),
      }),
      prepareAgent: async () => {
        await runtime.shutdown({ graceMs: 0 });
        return steppedAgent().agent;
      },
    });
    for (const item of ['a', 'b', 'c']) loop.push(item);
    loop.run();
    const exit = await loop.wait();
    expect(exit.exitReason).toMatchObject({ code: 'SHUTTING_DOWN' });
    expect(exit.unhandledItems).toEqual(['a', 'b', 'c']);
    expect(exit.droppedItems).toEqual([]);
  });
});
