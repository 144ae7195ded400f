/**
 * Test helpers: a runtime on a simulated clock, deferred promises and gated agents.
 * Nothing here sleeps on the wall clock; `tick()` only lets pending promise callbacks run.
 */
import { SimulatedClock } from 'xstate';
import { createRuntime, type Agent, type RunContext, type RuntimeOptions } from '../src/index.js';

export interface Deferred<T> {
  promise: Promise<T>;
  resolve(value: T): void;
  reject(error: unknown): void;
}

export function deferred<T = void>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** Lets every queued promise callback run (one macrotask turn; not a timed sleep). */
export function tick(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** The session most run and session tests run in: owner `alice`, session `s1`. */
export const owner = { ownerId: 'alice', sessionId: 's1' };

/** A runtime on a {@link SimulatedClock}; errors reported by the runtime are collected. */
export function createTestRuntime(options: RuntimeOptions = {}) {
  const clock = new SimulatedClock();
  const reported: unknown[] = [];
  const runtime = createRuntime({
    clock,
    reportError: (error) => reported.push(error),
    ...options,
  });
  return { runtime, clock, reported };
}

/** An agent that runs until its run's signal fires (even one that fired before it started). */
export const waitForCancel: Agent<unknown, string> = {
  execute: (_input, ctx) =>
    new Promise((resolve) => {
      if (ctx.signal.aborted) resolve('stopped');
      ctx.signal.addEventListener('abort', () => resolve('stopped'));
    }),
};

/**
 * An agent whose every execution waits for the test to release it.
 *
 * `honoursSignal` (default true): an abort of `ctx.signal` makes the execution reject at once.
 */
export function gatedAgent<TOutput = string>(options: { honoursSignal?: boolean } = {}) {
  const honoursSignal = options.honoursSignal ?? true;
  const executions: Array<{ input: unknown; ctx: RunContext }> = [];
  const gates = new Map<string, Deferred<TOutput>>();
  const starts = new Map<string, Deferred<void>>();
  const lazily = <T>(map: Map<string, Deferred<T>>, runId: string): Deferred<T> => {
    let d = map.get(runId);
    if (!d) map.set(runId, (d = deferred<T>()));
    return d;
  };
  const agent: Agent<unknown, TOutput> = {
    execute(input, ctx) {
      // The gate may have been opened before the agent started: a release is never lost.
      const gate = lazily(gates, ctx.runId);
      executions.push({ input, ctx });
      lazily(starts, ctx.runId).resolve();
      if (honoursSignal) {
        if (ctx.signal.aborted) return Promise.reject(ctx.signal.reason as Error);
        ctx.signal.addEventListener('abort', () => gate.reject(ctx.signal.reason), { once: true });
      }
      return gate.promise;
    },
  };
  const find = (runId: string) => {
    const execution = executions.find((e) => e.ctx.runId === runId);
    if (!execution) throw new Error(`run ${runId} never executed`);
    return execution;
  };
  return {
    agent,
    executions,
    /** Resolves when the agent of `runId` has started executing. */
    started: (runId: string) => lazily(starts, runId).promise,
    ran: (runId: string) => executions.some((e) => e.ctx.runId === runId),
    ctx: (runId: string) => find(runId).ctx,
    /** Lets the execution of `runId` return `output` (now, or as soon as it starts). */
    complete: (runId: string, output: TOutput) => lazily(gates, runId).resolve(output),
    /** Makes the execution of `runId` throw `error` (now, or as soon as it starts). */
    fail: (runId: string, error: unknown) => lazily(gates, runId).reject(error),
  };
}
