/**
 * A puppet agent for tests: every execution waits until the test tells it what to do.
 *
 * @module
 */
import type { SafePointKind } from '../../machines/cancel-request.js';
import type { Agent, RunContext } from '../run/agent.js';

/** What the agent does when its run's `ctx.signal` aborts. */
export type ScriptedAbortBehaviour = 'reject' | 'ignore';

/** Options of {@link createScriptedAgent}. Every field is optional. */
export interface ScriptedAgentOptions {
  /**
   * `'reject'`: an abort of `ctx.signal` makes the execution reject with the signal's reason, as
   * a well-behaved agent does. `'ignore'`: the execution goes on until the test completes or
   * fails it (an agent that ignores cancellation; the runtime abandons it after
   * `unwindTimeoutMs`). @default 'reject'
   */
  readonly onAbort?: ScriptedAbortBehaviour;
  /**
   * When `ctx.safePoint` throws (a safe-point cancel landed): `'reject'` lets the error
   * propagate, so the execution rejects with it; `'hold'` swallows it and the execution waits
   * for the test to complete or fail it (to observe the run while it unwinds). @default 'reject'
   */
  readonly onSafePointCancel?: 'reject' | 'hold';
  /**
   * Every settlement of an execution (complete, fail, reject on abort, reject at a cancelled
   * safe point) passes through this function before it lands, e.g. fast-check's `s.schedule`,
   * so that a scheduler decides when it lands relative to everything else.
   * @default lands as soon as the promise callbacks run
   */
  readonly schedule?: <T>(settlement: Promise<T>, label: string) => Promise<T>;
}

/** What {@link ScriptedAgent.safePoint} found. */
export type ScriptedSafePointResult = 'continued' | 'cancelled' | 'not_running';

/**
 * An {@link Agent} driven by hand, plus the controls to drive it, run by run.
 *
 * @remarks
 * Controls are addressed by run id and never lost: `complete` or `fail` before the run's
 * execution began applies as soon as it begins. An execution settles at most once; later
 * controls for it are ignored.
 */
export interface ScriptedAgent<TOutput = unknown> extends Agent<unknown, TOutput> {
  /** Run ids in the order their executions began. */
  readonly executed: readonly string[];
  /**
   * Resolves with the run's context once its execution began.
   *
   * @param runId - the run
   * @returns the {@link RunContext} handed to the execution
   */
  started(runId: string): Promise<RunContext>;
  /**
   * Whether the run's execution began and has not settled yet.
   *
   * @param runId - the run
   * @returns true while the agent is executing for that run
   */
  isExecuting(runId: string): boolean;
  /**
   * The context of a run whose execution began.
   *
   * @param runId - the run
   * @returns the run's {@link RunContext}, or `undefined` if it never executed
   */
  context(runId: string): RunContext | undefined;
  /**
   * Lets the run's execution return `output` (now, or as soon as it begins).
   *
   * @param runId - the run
   * @param output - what the execution returns
   * @returns nothing; a second settlement is ignored
   */
  complete(runId: string, output: TOutput): void;
  /**
   * Makes the run's execution throw `error` (now, or as soon as it begins).
   *
   * @param runId - the run
   * @param error - what the execution throws
   * @returns nothing; a second settlement is ignored
   */
  fail(runId: string, error: unknown): void;
  /**
   * The agent reaches a safe point: calls `ctx.safePoint(kind, state)`. When that throws (a
   * pending safe-point cancel matched, or the run is already cancelled), the execution rejects
   * with the error, as an agent that lets the cancel propagate does (unless
   * `onSafePointCancel: 'hold'`).
   *
   * @param runId - the run
   * @param kind - `'afterChatModel'` or `'afterToolCalls'`
   * @param state - optional state recorded at the safe point
   * @returns `'cancelled'` when the safe point threw, `'continued'` when it did not,
   *   `'not_running'` when the run is not executing
   */
  safePoint(runId: string, kind: SafePointKind, state?: unknown): ScriptedSafePointResult;
  /**
   * The agent emits an event through `ctx.emit` (dropped by the runtime once the run is terminal).
   *
   * @param runId - the run
   * @param type - the event type, e.g. `'agent.message'`
   * @param payload - the event payload
   * @returns whether the run was executing (the event was handed to `ctx.emit`)
   */
  emit(runId: string, type: string, payload?: Record<string, unknown>): boolean;
}

interface Execution<TOutput> {
  ctx?: RunContext;
  settled: boolean;
  /** A control that arrived before the execution began. */
  early?: { kind: 'complete'; output: TOutput } | { kind: 'fail'; error: unknown };
  resolve?: (output: TOutput) => void;
  reject?: (error: unknown) => void;
  started: Promise<RunContext>;
  markStarted: (ctx: RunContext) => void;
}

/**
 * Creates a {@link ScriptedAgent}: a puppet whose executions wait for the test.
 *
 * @remarks One agent serves any number of runs; each run's execution is driven by its run id.
 * It never sleeps and never touches a clock: it settles exactly when the test says so (or, with
 * `onAbort: 'reject'`, when its signal aborts), through `options.schedule` when given.
 *
 * @param options - {@link ScriptedAgentOptions}
 * @returns the agent, to pass to `runtime.prepare({ agent })`, with its controls
 * @throws nothing: a control for a run that has not executed yet is kept until it does
 * @example
 * ```ts
 * const agent = createScriptedAgent<string>();
 * const run = runtime.prepare({ ownerId: 'u', sessionId: 's', agent, input: null });
 * run.start();
 * await agent.started(run.id);
 * agent.complete(run.id, 'done');
 * console.log((await run.termination).status); // COMPLETED
 * ```
 */
export function createScriptedAgent<TOutput = unknown>(
  options: ScriptedAgentOptions = {},
): ScriptedAgent<TOutput> {
  const onAbort = options.onAbort ?? 'reject';
  const onSafePointCancel = options.onSafePointCancel ?? 'reject';
  const schedule = options.schedule;
  const executions = new Map<string, Execution<TOutput>>();
  const executed: string[] = [];

  const executionOf = (runId: string): Execution<TOutput> => {
    let execution = executions.get(runId);
    if (execution === undefined) {
      let markStarted!: (ctx: RunContext) => void;
      const started = new Promise<RunContext>((resolve) => (markStarted = resolve));
      execution = { settled: false, started, markStarted };
      executions.set(runId, execution);
    }
    return execution;
  };

  /** Settles through the scheduler when there is one; at most once per execution. */
  const settle = (
    runId: string,
    execution: Execution<TOutput>,
    outcome: { kind: 'complete'; output: TOutput } | { kind: 'fail'; error: unknown },
  ): void => {
    if (execution.settled) return;
    execution.settled = true;
    const land = () => {
      if (outcome.kind === 'complete') execution.resolve?.(outcome.output);
      else execution.reject?.(outcome.error);
    };
    if (schedule === undefined) {
      land();
      return;
    }
    void schedule(Promise.resolve(), `${runId}:${outcome.kind}`).then(land, land);
  };

  const agent: ScriptedAgent<TOutput> = {
    executed,
    execute(_input, ctx) {
      const execution = executionOf(ctx.runId);
      execution.ctx = ctx;
      executed.push(ctx.runId);
      const promise = new Promise<TOutput>((resolve, reject) => {
        execution.resolve = resolve;
        execution.reject = reject;
      });
      execution.markStarted(ctx);
      if (execution.early !== undefined) {
        settle(ctx.runId, execution, execution.early);
      } else if (onAbort === 'reject') {
        const onAbortSignal = () =>
          settle(ctx.runId, execution, { kind: 'fail', error: ctx.signal.reason });
        if (ctx.signal.aborted) onAbortSignal();
        else ctx.signal.addEventListener('abort', onAbortSignal, { once: true });
      }
      return promise;
    },
    started: (runId) => executionOf(runId).started,
    isExecuting(runId) {
      const execution = executions.get(runId);
      return execution?.ctx !== undefined && !execution.settled;
    },
    context: (runId) => executions.get(runId)?.ctx,
    complete(runId, output) {
      const execution = executionOf(runId);
      if (execution.ctx === undefined) execution.early ??= { kind: 'complete', output };
      else settle(runId, execution, { kind: 'complete', output });
    },
    fail(runId, error) {
      const execution = executionOf(runId);
      if (execution.ctx === undefined) execution.early ??= { kind: 'fail', error };
      else settle(runId, execution, { kind: 'fail', error });
    },
    safePoint(runId, kind, state) {
      const execution = executions.get(runId);
      if (execution?.ctx === undefined || execution.settled) return 'not_running';
      try {
        execution.ctx.safePoint(kind, state);
        return 'continued';
      } catch (error) {
        if (onSafePointCancel === 'reject') settle(runId, execution, { kind: 'fail', error });
        return 'cancelled';
      }
    },
    emit(runId, type, payload) {
      const execution = executions.get(runId);
      if (execution?.ctx === undefined || execution.settled) return false;
      execution.ctx.emit(type, payload);
      return true;
    },
  };
  return agent;
}
