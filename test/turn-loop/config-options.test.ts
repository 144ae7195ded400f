/**
 * TurnLoop behaviour beyond the named lists: config and push/stop option validation,
 * inspect observers, and stops or preempts that meet a run not yet started.
 */
import { describe, expect, it } from 'vitest';
import {
  CancelMode,
  InvalidArgumentError,
  TurnCancelledError,
  createTurnLoop,
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
