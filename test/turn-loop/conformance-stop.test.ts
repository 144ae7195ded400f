/**
 * Conformance with Eino ADK's TurnLoop (issue 3, "Conformance"): one test per item. This file:
 * run, wait and stop (idempotence, stops before and during planning, grace, idleness, causes).
 */
import { describe, expect, it } from 'vitest';
import { TurnCancelledError, createMemoryCheckpointStore } from '../../src/index.js';
import { createTestLoop, deferred, flush, until } from './helpers.js';

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
});
