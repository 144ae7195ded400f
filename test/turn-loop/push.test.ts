/**
 * TurnLoop behaviour beyond the named lists: push strategies, delayed preempts,
 * re-entrant pushes and late items.
 */
import { describe, expect, it } from 'vitest';
import { CancelMode, LateItemsTakenError, type TurnContext } from '../../src/index.js';
import { createTestLoop, flush, until } from './helpers.js';

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
