/**
 * Suspending a turn for outside input (issue 15 item 4; Eino's business interrupt): the agent
 * calls `ctx.suspend(request, state)`, the loop exits `'suspended'` with a mid-turn checkpoint,
 * and a later loop (new runtime, same store) resumes it through genResume with the answer.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  CancelMode,
  RunSuspendedError,
  TurnCancelledError,
  createMemoryCheckpointStore,
  createTurnLoop,
  type Agent,
  type CheckpointStore,
  type GenResumeArgs,
  type RunContext,
  type TurnLoopConfig,
} from '../../src/index.js';
import { createSqliteCheckpointStore } from '../../src/stores/sqlite/index.js';
import { createTestRuntime, decodeStored, until } from './helpers.js';

interface Call {
  readonly input: unknown;
  readonly ctx: RunContext;
  /** The agent calls `ctx.suspend(request, state)` and lets its error out. */
  suspend(request: unknown, state?: unknown): void;
  /** The agent reaches a safe point (a pending cancel may land there). */
  safePoint(): void;
  finish(output: string): void;
}

/** An agent the test drives: it suspends, reaches a safe point or finishes when told. */
function drivenAgent() {
  const calls: Call[] = [];
  const agent: Agent<unknown, string> = {
    execute: (input, ctx) =>
      new Promise<string>((resolve, reject) => {
        ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason as Error), {
          once: true,
        });
        const guarded = (step: () => void) => {
          try {
            step();
          } catch (error) {
            reject(error instanceof Error ? error : new Error(String(error)));
          }
        };
        calls.push({
          input,
          ctx,
          suspend: (request, state) => guarded(() => ctx.suspend(request, state)),
          safePoint: () => guarded(() => ctx.safePoint('afterToolCalls')),
          finish: resolve,
        });
      }),
  };
  return { agent, calls, last: () => calls.at(-1) as Call };
}

/** A loop of strings consuming one item per turn; genResume records what it was handed. */
function suspendLoop(
  store: CheckpointStore | undefined,
  extra: Partial<TurnLoopConfig<string>> = {},
) {
  const { runtime } = createTestRuntime();
  const driven = drivenAgent();
  const resumes: Array<GenResumeArgs<string>> = [];
  const loop = createTurnLoop<string>({
    runtime,
    ownerId: 'u1',
    sessionId: 's1',
    ...(store === undefined ? {} : { store, checkpointId: 'chat-1' }),
    genInput: (items) => ({
      input: items[0],
      consumed: items.slice(0, 1),
      remaining: items.slice(1),
    }),
    genResume: (args) => {
      resumes.push(args);
      return {
        input: { resumeFrom: args.agentState, answer: args.suspension?.answer },
        consumed: args.interrupted,
        remaining: [...args.unhandled, ...args.newItems],
      };
    },
    prepareAgent: () => driven.agent,
    ...extra,
  });
  return { loop, runtime, driven, resumes };
}

describe('TurnLoop suspend (business interrupt)', () => {
  let dir: string | undefined;
  afterEach(() => {
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
    dir = undefined;
  });

  it('suspend → SQLite checkpoint → a new loop on a new runtime resumes with the answer', async () => {
    dir = mkdtempSync(join(tmpdir(), 'runplane-suspend-'));
    const filename = join(dir, 'checkpoints.db');
    const store1 = createSqliteCheckpointStore({ filename });
    const first = suspendLoop(store1);
    first.loop.push('book a flight');
    first.loop.run();
    await until(() => first.driven.calls.length === 1, 'the first turn runs');
    first.loop.push('and a hotel'); // buffered while the turn runs
    const request = { kind: 'approval', tool: 'book', args: { to: 'LIS' } };
    first.driven.last().suspend(request, { step: 3 });
    const exit = await first.loop.wait();
    expect(exit.exitReason).toBe('suspended');
    expect(exit.suspension).toMatchObject({ turnId: 'turn-1', request });
    expect(typeof exit.suspension?.runId).toBe('string');
    expect(exit.interruptedItems).toEqual(['book a flight']);
    expect(exit.unhandledItems).toEqual(['and a hotel']);
    expect(exit.checkpointAttempted).toBe(true);
    expect(exit.checkpointError).toBeUndefined();
    const saved = decodeStored(await store1.get({}, 'chat-1'));
    expect(saved).toMatchObject({
      kind: 'mid-turn',
      interrupted: ['book a flight'],
      unhandled: ['and a hotel'],
      agentState: { step: 3 },
      suspension: { turnId: 'turn-1', request },
    });
    store1.close();
    await first.runtime.shutdown({ graceMs: 0 });

    // After a restart: a new runtime, a new store handle on the same file.
    const store2 = createSqliteCheckpointStore({ filename });
    const second = suspendLoop(store2);
    second.loop.push('one more thing');
    expect(second.loop.run({ answer: { approved: true } })).toBe(true);
    await until(() => second.driven.calls.length === 1, 'the resume turn runs');
    expect(second.resumes).toHaveLength(1);
    const args = second.resumes[0]!;
    expect(args.suspension).toEqual({
      turnId: 'turn-1',
      runId: exit.suspension?.runId,
      request,
      answer: { approved: true },
    });
    expect(args.agentState).toEqual({ step: 3 });
    expect(args.interrupted).toEqual(['book a flight']);
    expect(args.unhandled).toEqual(['and a hotel']);
    expect(args.newItems).toEqual(['one more thing']);
    expect(second.driven.last().input).toEqual({
      resumeFrom: { step: 3 },
      answer: { approved: true },
    });
    second.driven.last().finish('booked');
    await until(() => second.driven.calls.length === 2, 'the next turn runs');
    // The resumed turn consumed the suspended items: the checkpoint is used up.
    expect(await store2.get({}, 'chat-1')).toBeUndefined();
    second.loop.stop({ mode: 'immediate', skipCheckpoint: true });
    await second.loop.wait();
    store2.close();
    await second.runtime.shutdown({ graceMs: 0 });
  });

  it('a suspend that reaches the run before a pending graceful stop lands wins: the loop exits suspended', async () => {
    const store = createMemoryCheckpointStore();
    const { loop, driven, runtime } = suspendLoop(store);
    loop.push('a');
    loop.run();
    await until(() => driven.calls.length === 1, 'the turn runs');
    loop.stop({ mode: 'graceful', cause: 'deploy' });
    driven.last().suspend({ question: 'which seat?' });
    const exit = await loop.wait();
    expect(exit.exitReason).toBe('suspended');
    expect(exit.stopCause).toBe('deploy');
    expect(exit.suspension?.request).toEqual({ question: 'which seat?' });
    expect(decodeStored(await store.get({}, 'chat-1')).suspension?.request).toEqual({
      question: 'which seat?',
    });
    await runtime.shutdown({ graceMs: 0 });
  });

  it('a stop that landed first wins: the suspend throws the cancel into the agent, no suspension', async () => {
    const store = createMemoryCheckpointStore();
    const { loop, driven, runtime } = suspendLoop(store);
    loop.push('a');
    loop.run();
    await until(() => driven.calls.length === 1, 'the turn runs');
    const call = driven.last();
    loop.stop({ mode: 'graceful' });
    call.safePoint(); // the graceful stop lands here
    let thrown: unknown;
    try {
      call.ctx.suspend({ late: true });
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toMatchObject({ code: 'RUN_CANCELLED' });
    const exit = await loop.wait();
    expect(exit.exitReason).toBeInstanceOf(TurnCancelledError);
    expect(exit.suspension).toBeUndefined();
    expect(decodeStored(await store.get({}, 'chat-1')).suspension).toBeUndefined();
    await runtime.shutdown({ graceMs: 0 });
  });

  it('a suspend racing a pending preempt: the suspend wins and the preempting item waits in the checkpoint', async () => {
    const store = createMemoryCheckpointStore();
    const { loop, driven, runtime } = suspendLoop(store);
    loop.push('a');
    loop.run();
    await until(() => driven.calls.length === 1, 'the turn runs');
    loop.push('urgent', { preempt: CancelMode.AnySafePoint });
    driven.last().suspend({ form: 'address' });
    const exit = await loop.wait();
    expect(exit.exitReason).toBe('suspended');
    expect(exit.interruptedItems).toEqual(['a']);
    expect(exit.unhandledItems).toEqual(['urgent']);
    expect(decodeStored(await store.get({}, 'chat-1'))).toMatchObject({
      kind: 'mid-turn',
      unhandled: ['urgent'],
      suspension: { request: { form: 'address' } },
    });
    await runtime.shutdown({ graceMs: 0 });
  });

  it('without a store the loop still exits suspended, with the request, and saves nothing', async () => {
    const { loop, driven, runtime } = suspendLoop(undefined);
    loop.push('a');
    loop.run();
    await until(() => driven.calls.length === 1, 'the turn runs');
    driven.last().suspend({ approve: 'rm -rf build' }, { at: 'tool-call-1' });
    const exit = await loop.wait();
    expect(exit.exitReason).toBe('suspended');
    expect(exit.suspension?.request).toEqual({ approve: 'rm -rf build' });
    expect(exit.interruptedItems).toEqual(['a']);
    expect(exit.checkpointAttempted).toBe(false);
    await runtime.shutdown({ graceMs: 0 });
  });

  it('an onAgentEvents error beats the suspension: an error exit saves nothing', async () => {
    const store = createMemoryCheckpointStore();
    const failure = new Error('handler broke');
    const { loop, driven, runtime } = suspendLoop(store, {
      onAgentEvents: async (_turn, events) => {
        for await (const event of events) if (event.type === 'run.failed') return failure;
        return undefined;
      },
    });
    loop.push('a');
    loop.run();
    await until(() => driven.calls.length === 1, 'the turn runs');
    driven.last().suspend({ q: 1 });
    const exit = await loop.wait();
    expect(exit.exitReason).toBe(failure);
    expect(exit.suspension).toBeUndefined();
    expect(await store.get({}, 'chat-1')).toBeUndefined();
    await runtime.shutdown({ graceMs: 0 });
  });

  it('the request must be JSON data; a run outside a loop that suspends ends FAILED with RunSuspendedError', async () => {
    const { runtime } = createTestRuntime();
    const seen: unknown[] = [];
    const run = runtime.prepare({
      ownerId: 'u1',
      sessionId: 's2',
      input: undefined,
      agent: {
        execute: (_input, ctx) => {
          try {
            ctx.suspend({ when: Number.NaN });
          } catch (error) {
            seen.push(error);
          }
          const request = { approve: true, nested: { list: [1] } };
          try {
            ctx.suspend(request);
          } catch (error) {
            seen.push(error);
            expect(Object.isFrozen(request.nested)).toBe(true);
            return Promise.reject(error instanceof Error ? error : new Error(String(error)));
          }
          return Promise.resolve('unreachable');
        },
      },
    });
    run.start();
    const outcome = await run.termination;
    expect(seen[0]).toMatchObject({ code: 'INVALID_ARGUMENT', field: 'request' });
    expect(seen[1]).toBeInstanceOf(RunSuspendedError);
    expect(outcome).toMatchObject({ status: 'FAILED', error: { code: 'RUN_SUSPENDED' } });
    expect(run.suspension).toEqual({ request: { approve: true, nested: { list: [1] } } });
    await runtime.shutdown({ graceMs: 0 });
  });
});
