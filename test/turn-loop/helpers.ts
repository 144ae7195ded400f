/**
 * TurnLoop test helpers: a runtime on a simulated clock, deferred promises, and an agent the
 * test drives step by step. Nothing here sleeps on the wall clock: `flush()` only lets queued
 * promise callbacks and immediates run, `until()` polls a condition between such turns.
 */
import { SimulatedClock } from 'xstate';
import {
  jsonCheckpointCodec,
  type Checkpoint,
  createRuntime,
  createTurnLoop,
  type Agent,
  type RunContext,
  type RuntimeOptions,
  type SafePointKind,
  type TurnLoopConfig,
} from '../../src/index.js';

import { deferred } from '../helpers.js';

export { deferred };

/** Lets every queued promise callback run: `rounds` macrotask turns (not a timed sleep). */
export async function flush(rounds = 5): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}

/** Polls `condition` between macrotask turns; fails the test if it never holds. */
export async function until(condition: () => boolean, what = 'condition'): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if (condition()) return;
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
  throw new Error(`never happened: ${what}`);
}

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

type Command =
  | { type: 'safePoint'; kind: SafePointKind; state: unknown }
  | { type: 'finish'; output: string }
  | { type: 'fail'; error: unknown };

/** One execution of a {@link steppedAgent}. */
export interface Execution {
  readonly input: unknown;
  readonly ctx: RunContext;
  /** Settles when the execution has returned or thrown. */
  readonly settled: Promise<void>;
  /** Whether it has returned or thrown. */
  done: boolean;
  /** The agent reports a safe point (which may throw the pending cancel into it). */
  safePoint(kind: SafePointKind, state?: unknown): void;
  /** The agent returns `output`. */
  finish(output?: string): void;
  /** The agent throws `error`. */
  fail(error: unknown): void;
}

/**
 * An agent that does nothing until the test tells it to: reach a safe point, finish, fail.
 *
 * `unwindGate` (optional): on abort the execution waits for it before rejecting (a slow unwind).
 */
export function steppedAgent(options: { unwindGate?: Promise<void> } = {}) {
  const executions: Execution[] = [];
  const agent: Agent<unknown, string> = {
    async execute(input, ctx) {
      const commands: Command[] = [];
      let wake: (() => void) | undefined;
      const settled = deferred();
      const execution: Execution = {
        input,
        ctx,
        settled: settled.promise,
        done: false,
        safePoint: (kind, state) => push({ type: 'safePoint', kind, state }),
        finish: (output = `done:${String(input)}`) => push({ type: 'finish', output }),
        fail: (error) => push({ type: 'fail', error }),
      };
      function push(command: Command) {
        commands.push(command);
        wake?.();
      }
      executions.push(execution);
      const aborted = new Promise<never>((_, reject) => {
        const onAbort = () => {
          const reason = ctx.signal.reason as Error;
          if (options.unwindGate === undefined) reject(reason);
          else void options.unwindGate.then(() => reject(reason));
        };
        if (ctx.signal.aborted) onAbort();
        else ctx.signal.addEventListener('abort', onAbort, { once: true });
      });
      aborted.catch(() => undefined);
      try {
        for (;;) {
          while (commands.length === 0) {
            await Promise.race([new Promise<void>((resolve) => (wake = resolve)), aborted]);
          }
          const command = commands.shift() as Command;
          if (command.type === 'safePoint') ctx.safePoint(command.kind, command.state);
          else if (command.type === 'finish') return command.output;
          else throw command.error;
        }
      } finally {
        execution.done = true;
        settled.resolve();
      }
    },
  };
  return {
    agent,
    executions,
    /** The latest execution (fails if none). */
    last(): Execution {
      const execution = executions.at(-1);
      if (execution === undefined) throw new Error('the agent never executed');
      return execution;
    },
    inputs: () => executions.map((e) => e.input),
  };
}

/**
 * A TurnLoop of strings on a test runtime whose genInput consumes the first item and keeps the
 * rest, and whose agent is a {@link steppedAgent}. Calls are recorded.
 */
export function createTestLoop(
  overrides: Partial<TurnLoopConfig<string, unknown>> = {},
  runtimeOptions: RuntimeOptions = {},
) {
  const { runtime, clock, reported } = createTestRuntime(runtimeOptions);
  const stepped = steppedAgent();
  const genInputCalls: Array<{ items: string[]; preemptedItems: string[]; turnId: string }> = [];
  const prepared: Array<{ turnId: string; consumed: string[] }> = [];
  const loop = createTurnLoop<string>({
    runtime,
    ownerId: 'u1',
    sessionId: 's1',
    genInput: (items, info) => {
      genInputCalls.push({
        items: [...items],
        preemptedItems: [...info.preemptedItems],
        turnId: info.turnId,
      });
      const all = [...info.preemptedItems, ...items];
      return { input: all[0], consumed: all.slice(0, 1), remaining: all.slice(1) };
    },
    prepareAgent: (consumed, info) => {
      prepared.push({ turnId: info.turnId, consumed: [...consumed] });
      return stepped.agent;
    },
    ...overrides,
  });
  return { loop, runtime, clock, reported, stepped, genInputCalls, prepared };
}

/** Decodes stored checkpoint bytes with the default codec (fails the test when absent). */
export function decodeStored(data: Uint8Array | undefined): Checkpoint<string> {
  if (data === undefined) throw new Error('no checkpoint stored');
  return jsonCheckpointCodec.decode(data) as Checkpoint<string>;
}
