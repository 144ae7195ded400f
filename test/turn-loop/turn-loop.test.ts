/**
 * TurnLoop behaviour beyond the named lists: option validation, strategies, late
 * items, turn-context signals, callback failures, dropped items.
 */
import { describe, expect, it } from 'vitest';
import {
  CancelMode,
  InvalidArgumentError,
  LateItemsTakenError,
  TurnCancelledError,
  createTurnLoop,
  type TurnContext,
} from '../../src/index.js';
import {
  createTestLoop,
  createTestRuntime,
  deferred,
  flush,
  steppedAgent,
  until,
} from './helpers.js';

describe('TurnLoop config and options', () => {
  it('refuses a bad config with INVALID_ARGUMENT naming the field', () => {
    const { runtime } = createTestRuntime();
    const base = {
      runtime,
      ownerId: 'u1',
      sessionId: 's1',
      genInput: () => ({ input: 1, consumed: [] }),
      prepareAgent: () => steppedAgent().agent,
    };
    const field = (config: object) => {
      try {
        createTurnLoop(config as Parameters<typeof createTurnLoop>[0]);
      } catch (error) {
        expect(error).toBeInstanceOf(InvalidArgumentError);
        return (error as InvalidArgumentError).field;
      }
      return 'no error';
    };
    expect(field({ ...base, ownerId: '' })).toBe('ownerId');
    expect(field({ ...base, genInput: undefined })).toBe('genInput');
    expect(field({ ...base, runtime: {} })).toBe('runtime');
    expect(field({ ...base, store: { get() {} } })).toBe('store');
    expect(field({ ...base, checkpointId: 'c' })).toBe('store');
    expect(field({ ...base, store: { get() {}, set() {}, delete() {} } })).toBe('checkpointId');
    expect(field({ ...base, requeuePreempted: 'yes' })).toBe('requeuePreempted');
    // A typo is caught, not silently dropped (a loop that would never checkpoint).
    expect(field({ ...base, checkpointID: 'c' })).toBe('checkpointID');
  });

  it('hands every loop transition to an inspect observer', async () => {
    const types = new Set<string>();
    const loopValues: unknown[] = [];
    const { loop, stepped } = createTestLoop({
      inspect: (event) => {
        types.add(event.type);
        if (event.type !== '@xstate.snapshot') return;
        const value = (event.snapshot as { value?: unknown }).value;
        if (typeof value === 'object' && value !== null && 'loop' in value) loopValues.push(value);
      },
    });
    loop.push('a');
    loop.run();
    await until(() => stepped.executions.length === 1, 'turn started');
    stepped.last().finish();
    loop.stop();
    await loop.wait();
    expect(types).toContain('@xstate.event');
    expect(loopValues).toContainEqual({ loop: { turn: 'running' }, stop: 'open' });
    expect(loopValues.at(-1)).toEqual({ loop: 'exited', stop: 'closed' });
  });

  it('an inspector (of the loop or of the runtime) that throws is reported and breaks nothing', async () => {
    const bug = new Error('inspector bug');
    const throwing = () => {
      throw bug;
    };
    const { loop, stepped, reported } = createTestLoop(
      { inspect: throwing },
      { inspect: { next: throwing } },
    );
    loop.push('a');
    loop.run();
    await until(() => stepped.executions.length === 1, 'turn 1 started');
    expect(loop.push('b', { preempt: CancelMode.AnySafePoint }).accepted).toBe(true);
    stepped.last().safePoint('afterChatModel');
    await until(() => stepped.executions.length === 2, 'turn 2 started');
    stepped.last().finish();
    loop.stop();
    const exit = await loop.wait();
    expect(exit.exitReason).toBeUndefined();
    expect(exit.unhandledItems).toEqual([]);
    expect(reported.length).toBeGreaterThan(10);
    expect(reported.every((error) => error === bug)).toBe(true);
  });

  it('a stop from code that run.start() runs (an inspector) undoes the turn: onAgentEvents never sees it', async () => {
    const handled: string[][] = [];
    let stopOnStart = true;
    const made = createTestLoop(
      {
        onAgentEvents: (turn) => {
          handled.push([...turn.consumed]);
          return undefined;
        },
      },
      {
        inspect: (event) => {
          const type = (event as { event?: { type?: string } }).event?.type;
          if (stopOnStart && event.type === '@xstate.event' && type === 'run.start') {
            stopOnStart = false;
            made.loop.stop({ mode: 'immediate' });
          }
        },
      },
    );
    made.loop.push('a');
    made.loop.run();
    const exit = await made.loop.wait();
    await flush();
    expect(exit.unhandledItems).toEqual(['a']);
    expect(exit.interruptedItems).toEqual([]);
    expect(handled).toEqual([]);
    expect(made.stepped.executions).toHaveLength(0); // the run was cancelled before its agent ran
  });

  it('a turn preempted while its run still waited in the session (behind another run) gives its items back', async () => {
    const { loop, runtime, stepped, prepared } = createTestLoop();
    const gate = deferred();
    const other = runtime.prepare({
      ownerId: 'u1',
      sessionId: 's1', // the loop's session: its turns queue behind this run
      agent: { execute: async () => gate.promise },
      input: 0,
    });
    other.start();
    loop.push('a');
    loop.run();
    await until(() => prepared.length === 1, 'turn 1 planned');
    await flush();
    loop.push('urgent', { preempt: CancelMode.AnySafePoint }); // cancels the queued run at once
    await until(() => prepared.length === 2, 'turn 2 planned');
    gate.resolve();
    await until(() => stepped.executions.length === 1, 'an agent ran');
    stepped.last().finish();
    await until(() => stepped.executions.length === 2, 'the next agent ran');
    stepped.last().finish();
    loop.stop();
    const exit = await loop.wait();
    expect(prepared.map((p) => p.consumed)).toEqual([['a'], ['a'], ['urgent']]);
    expect(exit.unhandledItems).toEqual([]);
  });

  it("after an afterTurn stop, a turn cancelled by someone else keeps that cancel's cause and reason", async () => {
    const { loop, runtime, stepped } = createTestLoop();
    loop.push('a');
    loop.run();
    await until(() => stepped.executions.length === 1, 'turn started');
    loop.stop({ cause: 'after' }); // afterTurn: the stop itself cancels nothing
    const runId = runtime.session('u1', 's1').activeRunId as string;
    expect(runtime.runs.cancel('u1', 's1', runId, { reason: 'user hit X' })).toBe('accepted');
    const exit = await loop.wait();
    expect(exit.exitReason).toBeInstanceOf(TurnCancelledError);
    expect(exit.exitReason).toMatchObject({ cancelCause: 'cancel', reason: 'user hit X' });
    expect(exit.stopCause).toBe('after');
    expect(exit.interruptedItems).toEqual(['a']);
  });

  it('refuses bad push options with INVALID_ARGUMENT and buffers nothing', async () => {
    const { loop } = createTestLoop();
    const field = (run: () => unknown) => {
      try {
        run();
      } catch (error) {
        expect(error).toMatchObject({ code: 'INVALID_ARGUMENT' });
        return (error as InvalidArgumentError).field;
      }
      return 'no error';
    };
    expect(field(() => loop.push('x', { preempt: 0 }))).toBe('preempt');
    expect(field(() => loop.push('x', { preempt: CancelMode.Immediate }))).toBe('preempt');
    expect(field(() => loop.push('x', { preempt: 4 }))).toBe('preempt');
    expect(field(() => loop.push('x', { preemptTimeoutMs: 5 }))).toBe('preemptTimeoutMs');
    expect(field(() => loop.push('x', { preempt: 1, preemptDelayMs: -1 }))).toBe('preemptDelayMs');
    expect(field(() => loop.push('x', { preempt: 1, strategy: () => undefined }))).toBe('strategy');
    expect(field(() => loop.push(undefined as unknown as string))).toBe('item');
    expect(field(() => loop.stop({ mode: 'immediate', graceMs: 5 }))).toBe('graceMs');
    expect(field(() => loop.stop({ mode: 'later' as 'graceful' }))).toBe('mode');
    // An idle stop has no turn to cancel: a mode or a grace with it is refused.
    expect(field(() => loop.stop({ idleForMs: 50, mode: 'immediate' }))).toBe('mode');
    expect(field(() => loop.stop({ idleForMs: 50, graceMs: 5 }))).toBe('graceMs');
    // Typos: a push without its preempt, a stop that would commit in afterTurn mode.
    expect(field(() => loop.push('x', { preemt: 1 } as object))).toBe('preemt');
    expect(field(() => loop.stop({ grace: 10 } as object))).toBe('grace');
    expect(loop.push('still open').accepted).toBe(true); // the bad stop did not stop the loop
    loop.stop();
    const exit = await loop.wait();
    expect(exit.unhandledItems).toEqual(['still open']); // none of the refused ones
  });
});

describe('TurnLoop push strategies', () => {
  it('a strategy sees the running turn (the same TurnContext as onAgentEvents) and decides the preempt in the push', async () => {
    const seen: Array<TurnContext<string> | undefined> = [];
    const handlerTurns: TurnContext<string>[] = [];
    const { loop, stepped } = createTestLoop({
      onAgentEvents: async (turn, events) => {
        handlerTurns.push(turn);
        for await (const _ of events) void _;
      },
    });
    const lowPriority = (turn: TurnContext<string> | undefined) => {
      seen.push(turn);
      return turn?.consumed.includes('low') === true
        ? { preempt: CancelMode.AnySafePoint, strategy: () => ({ preempt: 0 }) } // nested strategy ignored
        : undefined;
    };
    loop.run();
    await flush();
    loop.push('idle-push', { strategy: lowPriority }); // no turn yet
    await until(() => stepped.executions.length === 1, 'turn 1 started');
    loop.push('low');
    stepped.last().finish();
    await until(() => stepped.executions.length === 2, 'turn 2 (low) started');
    const low = stepped.last();
    const pushed = loop.push('urgent', { strategy: lowPriority });
    await pushed.ack;
    expect(seen[0]).toBeUndefined();
    expect(seen[1]).toBe(handlerTurns[1]);
    expect(seen[1]?.consumed).toEqual(['low']);
    expect(handlerTurns[1]?.preempted.aborted).toBe(true);
    low.safePoint('afterChatModel');
    await until(() => stepped.executions.length === 3, 'turn 3 (urgent) started');
    expect(stepped.last().input).toBe('urgent');
    stepped.last().finish();
    loop.stop();
    expect((await loop.wait()).exitReason).toBeUndefined();
  });

  it('a strategy that throws or answers badly makes push throw, and the item is not buffered', async () => {
    const { loop, stepped } = createTestLoop();
    loop.push('a');
    loop.run();
    await until(() => stepped.executions.length === 1, 'turn started');
    const boom = new Error('strategy bug');
    expect(() =>
      loop.push('x', {
        strategy: () => {
          throw boom;
        },
      }),
    ).toThrow(boom);
    expect(() => loop.push('y', { strategy: () => ({ preempt: 0 }) })).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT', field: 'strategy().preempt' }),
    );
    expect(() =>
      loop.push('z', { strategy: () => Promise.resolve({ preempt: 1 }) as never }),
    ).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT', field: 'strategy()' }));
    expect(() => loop.push('t', { strategy: () => ({ preemt: 1 }) as never })).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT', field: 'strategy().preemt' }),
    );
    // A strategy in the answer is ignored (Eino): no preempt, the item is buffered.
    expect(loop.push('s', { strategy: () => ({ strategy: () => undefined }) }).accepted).toBe(true);
    stepped.last().safePoint('afterChatModel');
    await flush();
    expect(stepped.last().done).toBe(false); // nothing was preempted
    loop.stop({ mode: 'immediate' });
    const exit = await loop.wait();
    expect(exit.unhandledItems).toEqual(['s']);
    expect(exit.takeLateItems()).toEqual([]);
  });
});

describe('TurnLoop delayed preempts', () => {
  it('a delayed preempt is delivered to its turn when the delay is over, and acknowledged then', async () => {
    const { loop, stepped, clock } = createTestLoop();
    loop.push('a');
    loop.run();
    await until(() => stepped.executions.length === 1, 'turn 1 started');
    const first = stepped.last();
    const pushed = loop.push('later', { preempt: CancelMode.AnySafePoint, preemptDelayMs: 50 });
    let acked = false;
    void pushed.ack.then(() => (acked = true));
    clock.increment(49);
    first.safePoint('afterToolCalls'); // not yet due: no cancel pending
    await flush();
    expect(first.done).toBe(false);
    expect(acked).toBe(false);
    clock.increment(1);
    await until(() => acked, 'delivered at 50 ms');
    first.safePoint('afterToolCalls');
    await until(() => stepped.executions.length === 2, 'turn 2 started');
    expect(first.done).toBe(true);
    expect(stepped.last().input).toBe('later');
    stepped.last().finish();
    loop.stop();
    expect((await loop.wait()).exitReason).toBeUndefined();
  });
});

/** A push made by a strategy, inside the loop step of another push, is refused. */
function expectReentrantPushRefused(loop: ReturnType<typeof createTestLoop>['loop']): void {
  expect(() =>
    loop.push('outer', {
      strategy: () => {
        loop.push('inner');
        return undefined;
      },
    }),
  ).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT', field: 'push()' }));
}

describe('TurnLoop re-entrant pushes', () => {
  it('a push from inside a loop step (here a strategy) throws INVALID_ARGUMENT and buffers nothing', async () => {
    const { loop, stepped } = createTestLoop();
    loop.push('a');
    loop.run();
    await until(() => stepped.executions.length === 1, 'turn started');
    expectReentrantPushRefused(loop);
    loop.stop({ mode: 'immediate' });
    const exit = await loop.wait();
    expect(exit.unhandledItems).toEqual([]);
    expect(exit.takeLateItems()).toEqual([]);
  });

  it('a plain push from inside a loop step throws too, while plain pushes skip the machine', async () => {
    const { loop, stepped, genInputCalls } = createTestLoop();
    loop.push('a');
    loop.run();
    await until(() => stepped.executions.length === 1, 'turn started');
    // A push is pending planning: later plain pushes are one append, and share one answer.
    const first = loop.push('b');
    expect(loop.push('c')).toBe(loop.push('d'));
    expect(first.accepted).toBe(true);
    expectReentrantPushRefused(loop);
    loop.push('e');
    stepped.last().finish();
    await until(() => stepped.executions.length === 2, 'turn 2 started');
    expect(genInputCalls[1]?.items).toEqual(['b', 'c', 'd', 'e']);
    loop.stop({ mode: 'immediate' });
    const exit = await loop.wait();
    expect(exit.unhandledItems).toEqual(['c', 'd', 'e']);
    expect(exit.takeLateItems()).toEqual([]);
  });

  it('a plain push into a loop waiting after a turn starts the next turn', async () => {
    const { loop, stepped, genInputCalls } = createTestLoop();
    loop.push('a');
    loop.run();
    await until(() => stepped.executions.length === 1, 'turn 1 started');
    stepped.last().finish();
    await until(() => stepped.executions[0]!.done, 'turn 1 finished');
    await flush();
    loop.push('b');
    await until(() => stepped.executions.length === 2, 'turn 2 started');
    expect(genInputCalls.map((call) => call.items)).toEqual([['a'], ['b']]);
    stepped.last().finish();
    loop.stop();
    expect((await loop.wait()).exitReason).toBeUndefined();
  });

  it('genInput and prepareAgent run outside any loop step, so they may push (for a later turn)', async () => {
    let pushedFromCallbacks = false;
    const turns: string[] = [];
    const { loop, stepped } = createTestLoop({
      genInput: (items) => {
        if (items[0] === 'a') loop.push('from genInput');
        return { input: items[0], consumed: items.slice(0, 1), remaining: items.slice(1) };
      },
      prepareAgent: (consumed) => {
        turns.push(...consumed);
        if (consumed[0] === 'a') pushedFromCallbacks = loop.push('from prepareAgent').accepted;
        return stepped.agent;
      },
    });
    loop.push('a');
    loop.run();
    await until(() => stepped.executions.length === 1, 'turn 1 started');
    expect(pushedFromCallbacks).toBe(true);
    stepped.last().finish();
    await until(() => stepped.executions.length === 2, 'turn 2 started');
    stepped.last().finish();
    await until(() => stepped.executions.length === 3, 'turn 3 started');
    stepped.last().finish();
    loop.stop();
    expect((await loop.wait()).exitReason).toBeUndefined();
    expect(turns).toEqual(['a', 'from genInput', 'from prepareAgent']);
  });

  it('listeners on turn.preempted and runtime event listeners run outside the loop step, so they may push', async () => {
    const pushedFromListeners: boolean[] = [];
    const { loop, stepped, runtime } = createTestLoop({
      onAgentEvents: async (turn, events) => {
        turn.preempted.addEventListener('abort', () => {
          pushedFromListeners.push(loop.push(`after-preempt-of-${turn.turnId}`).accepted);
        });
        for await (const _ of events) void _;
      },
    });
    let mirrored = 0;
    runtime.onEvent((event) => {
      if (event.type === 'session.run_started' && mirrored++ === 0) {
        pushedFromListeners.push(loop.push('from-event-listener').accepted);
      }
    });
    loop.push('a');
    loop.run();
    await until(() => stepped.executions.length === 1, 'turn 1 started');
    await loop.push('urgent', { preempt: CancelMode.AnySafePoint }).ack;
    await flush();
    expect(pushedFromListeners).toEqual([true, true]);
    loop.stop({ mode: 'immediate' });
    const exit = await loop.wait();
    expect(exit.unhandledItems).toEqual(
      expect.arrayContaining(['from-event-listener', 'urgent', 'after-preempt-of-turn-1']),
    );
  });
});

describe('TurnLoop late items', () => {
  it('a push after stop is refused and kept as a late item; after takeLateItems() a push throws LATE_ITEMS_TAKEN', async () => {
    const { loop } = createTestLoop();
    loop.run();
    loop.stop();
    const refused = loop.push('late-1', { preempt: CancelMode.AnySafePoint });
    expect(refused.accepted).toBe(false);
    await refused.ack; // resolved: nothing to preempt
    const exit = await loop.wait();
    expect(loop.push('late-2').accepted).toBe(false);
    expect(exit.takeLateItems()).toEqual(['late-1', 'late-2']);
    expect(exit.takeLateItems()).toEqual([]);
    expect(() => loop.push('late-3')).toThrow(LateItemsTakenError);
    expect(() => loop.push('late-3')).toThrow(
      expect.objectContaining({ code: 'LATE_ITEMS_TAKEN' }),
    );
  });
});

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
