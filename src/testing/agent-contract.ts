/**
 * The agent contract as a ready-made model (README "Testing your agents"): what every agent
 * runplane runs owes its run, checked on the simulated clock while a race property drives it.
 * The author of an agent writes no model to get these checks.
 *
 * @module
 */
import { RunCancelledError } from '../errors.js';
import type { Agent, RunContext } from '../run/agent.js';
import type { AgentRun } from '../run/agent-run.js';
import type { RunOutcome } from '../run/run-outcome.js';
import type { TestClock } from './test-clock.js';

/**
 * The named invariants of the agent contract; a failure's message starts with one of them in
 * brackets, then the run it concerns.
 *
 * - `cancel-settles`: once a run's signal aborts, its agent settles (returns or throws) within
 *   `settleWithinMs` on the simulated clock; an agent the runtime had to abandon breaks it too.
 * - `cancel-no-normal-result`: an agent whose signal aborted, or whose safe point threw
 *   `RUN_CANCELLED`, does not return a normal result (the runtime would discard it).
 * - `no-events-after-terminal`: an agent emits nothing once its run is terminal (the runtime
 *   drops such events; in test mode they are reported); for a cancelled run, from the moment
 *   its agent could see the abort (its signal aborted), since the status turns terminal just
 *   before the signal aborts.
 * - `safe-point-within-bound`: while its run is RUNNING, an agent reaches a safe point at least
 *   every `safePointWithinMs` (only when that promise is made).
 * - `nested-settles-with-parent`: a nested run (from `ctx.spawn`) settles within
 *   `settleWithinMs` of its parent's agent settling.
 * - `interrupt-recovery-reply`: an interrupted run ends in a recovery reply, not a throw.
 */
export type AgentInvariant =
  | 'cancel-settles'
  | 'cancel-no-normal-result'
  | 'no-events-after-terminal'
  | 'safe-point-within-bound'
  | 'nested-settles-with-parent'
  | 'interrupt-recovery-reply';

/** The promises an agent makes, in simulated ms. */
export interface AgentContractOptions {
  /** How long after its signal aborts an agent may take to settle. @default 1000 */
  readonly settleWithinMs?: number;
  /**
   * The longest stretch of a RUNNING run without a safe point. Promise it only if your agent
   * reaches `ctx.safePoint(...)` that often (e.g. after every model reply and tool batch).
   * @default none (not checked)
   */
  readonly safePointWithinMs?: number;
  /**
   * How long your agent's slowest step (a model reply, a tool call) takes on the simulated
   * clock. The world moves time in advances of up to this, and cancels escalate after a fifth
   * of it or four thirds of it, so sequences reach past that step; code the world never
   * reaches is not judged (see {@link AgentReach}). @default 150
   */
  readonly stepMs?: number;
}

/**
 * How much of your agent a property's sequences reached, summed over them: a part never reached
 * (nested runs, safe points, a normal result) was not judged by the contract.
 */
export interface AgentReach {
  /** Executions of your agent started (nested ones included). */
  runs: number;
  /** Of those, nested runs (`ctx.spawn`). */
  nestedRuns: number;
  /** Safe points reached. */
  safePoints: number;
  /** Executions that returned a result. */
  results: number;
}

/** @internal What the contract knows of one execution of the agent under test. */
export interface WatchedRun {
  readonly runId: string;
  readonly parentRunId: string | undefined;
  run: AgentRun<unknown> | undefined;
  readonly startedAt: number;
  lastSafePointAt: number;
  abortedAt: number | undefined;
  /**
   * The abort could be seen by the agent: set one microtask after the abort event, before
   * anything the agent chained on the signal can run, so a return already under way when the
   * abort landed is not blamed on the agent.
   */
  abortVisible: boolean;
  /** A safe point threw RUN_CANCELLED to the agent. */
  cancelSeen: boolean;
  settledAt: number | undefined;
  outcome: RunOutcome | undefined;
  /** Ids of the nested runs it spawned. */
  readonly children: string[];
}

const isTerminal = (status: string | undefined): boolean =>
  status === 'COMPLETED' || status === 'FAILED' || status === 'CANCELLED';

/**
 * @internal Wraps agents so every execution is watched, and checks the contract on demand.
 */
export class AgentContract {
  readonly watched = new Map<string, WatchedRun>();
  readonly violations: string[] = [];
  /** What the agent reached in this sequence. */
  readonly reached: AgentReach = { runs: 0, nestedRuns: 0, safePoints: 0, results: 0 };
  /** Run handles by id, known before or after their execution begins. */
  readonly #handles = new Map<string, AgentRun<unknown>>();
  readonly #settleWithinMs: number;
  readonly #safePointWithinMs: number | undefined;

  constructor(
    readonly clock: TestClock,
    options: AgentContractOptions = {},
  ) {
    this.#settleWithinMs = options.settleWithinMs ?? 1_000;
    this.#safePointWithinMs = options.safePointWithinMs;
  }

  /** Counts of repeated violations, by the index of their first report in `violations`. */
  readonly #repeats = new Map<number, number>();

  #fail(invariant: AgentInvariant, runId: string, what: string): void {
    const parent = this.watched.get(runId)?.parentRunId;
    const name = parent === undefined ? runId : `${runId} (nested in ${parent})`;
    const head = `[${invariant}] run ${name} `;
    // The lines before were handed out and cleared: their counts go with them.
    if (this.violations.length === 0) this.#repeats.clear();
    // Once per run and invariant, with a count: an agent that emits 300,000 events after its
    // cancel gets one line, not a report of 300,000.
    const first = this.violations.findIndex((line) => line.startsWith(head));
    if (first < 0) {
      this.violations.push(`${head}${what}`);
      return;
    }
    const times = (this.#repeats.get(first) ?? 1) + 1;
    this.#repeats.set(first, times);
    this.violations[first] =
      `${this.violations[first]!.replace(/ \(\d+ times\)$/, '')} (${times} times)`;
  }

  #lateSettle(watched: WatchedRun, late: number): void {
    this.#fail(
      watched.parentRunId === undefined ? 'cancel-settles' : 'nested-settles-with-parent',
      watched.runId,
      `took ${late}ms after its signal aborted to settle (bound ${this.#settleWithinMs}ms): is a tool or nested agent ignoring ctx.signal?`,
    );
    watched.abortedAt = Number.POSITIVE_INFINITY; // reported once
  }

  /** Tells the contract which run handle an execution belongs to (for its status). */
  attach(run: AgentRun<unknown>): void {
    this.#handles.set(run.id, run);
    const watched = this.watched.get(run.id);
    if (watched !== undefined) watched.run = run;
    void run.termination.then((outcome) => {
      const record = this.watched.get(run.id);
      if (record !== undefined) record.outcome = outcome;
    });
  }

  /**
   * The agent under test, watched: its context's `emit`, `safePoint` and `spawn` report to the
   * contract (nested agents are watched too), and so does how `execute` settles.
   */
  watch<TInput, TOutput>(agent: Agent<TInput, TOutput>): Agent<TInput, TOutput> {
    return {
      execute: async (input, ctx) => {
        const watched = this.#begin(ctx);
        let result: Promise<TOutput>;
        try {
          result = agent.execute(input, this.#watchedContext(ctx, watched));
        } catch (error) {
          this.#settled(watched, ctx, error);
          throw error;
        }
        // Chained on the agent's own promise, so the reaction is queued the moment it settles.
        return result.then(
          (output) => {
            this.#settled(watched, ctx, 'returned');
            return output;
          },
          (error: unknown) => {
            this.#settled(watched, ctx, error);
            throw error;
          },
        );
      },
    };
  }

  #begin(ctx: RunContext): WatchedRun {
    const now = this.clock.now();
    this.reached.runs++;
    if (ctx.parentRunId !== undefined) this.reached.nestedRuns++;
    const watched: WatchedRun = {
      runId: ctx.runId,
      parentRunId: ctx.parentRunId,
      run: this.#handles.get(ctx.runId),
      startedAt: now,
      lastSafePointAt: now,
      abortedAt: undefined,
      abortVisible: false,
      cancelSeen: false,
      settledAt: undefined,
      outcome: undefined,
      children: [],
    };
    this.watched.set(ctx.runId, watched);
    // Registered before the agent runs, so this listener is the signal's first.
    const signal = ctx.signal;
    if (signal.aborted) {
      watched.abortedAt = now;
      watched.abortVisible = true;
    } else {
      const onAbort = () => {
        watched.abortedAt ??= this.clock.now();
        queueMicrotask(() => (watched.abortVisible = true));
      };
      signal.addEventListener('abort', onAbort, { once: true });
    }
    return watched;
  }

  #watchedContext(ctx: RunContext, watched: WatchedRun): RunContext {
    const copy = Object.defineProperties({}, Object.getOwnPropertyDescriptors(ctx)) as RunContext;
    const { emit, safePoint, spawn } = ctx;
    return Object.assign(copy, {
      emit: (type: string, payload?: Record<string, unknown>) => {
        const status = watched.run?.status;
        // A cancelled run's status turns terminal in its step and its signal aborts right
        // after: an emit in between (a continuation already queued) could not have known.
        if (isTerminal(status) && (status !== 'CANCELLED' || watched.abortVisible)) {
          this.#fail(
            'no-events-after-terminal',
            watched.runId,
            `emitted ${type} after it ended ${status}`,
          );
        }
        emit(type, payload);
      },
      safePoint: (kind: Parameters<RunContext['safePoint']>[0], state?: unknown) => {
        watched.lastSafePointAt = this.clock.now();
        this.reached.safePoints++;
        try {
          safePoint(kind, state);
        } catch (error) {
          if (error instanceof RunCancelledError) watched.cancelSeen = true;
          throw error;
        }
      },
      spawn: <I, O>(agent: Agent<I, O>, input: I, options?: Parameters<RunContext['spawn']>[2]) => {
        const child = spawn(this.watch(agent), input, options);
        this.attach(child);
        watched.children.push(child.id);
        return child;
      },
    });
  }

  #settled(watched: WatchedRun, ctx: RunContext, how: unknown): void {
    watched.settledAt = this.clock.now();
    if (how === 'returned') this.reached.results++;
    // The clock may have jumped past the bound in one advance: judge by the settle time too.
    if (watched.abortedAt !== undefined) {
      const late = watched.settledAt - watched.abortedAt;
      if (late > this.#settleWithinMs) this.#lateSettle(watched, late);
    }
    const cancelled = watched.abortVisible || watched.cancelSeen;
    if (how === 'returned' && cancelled) {
      this.#fail(
        'cancel-no-normal-result',
        watched.runId,
        'returned a normal result after its cancel (the runtime discards that output): rethrow the abort, or let it propagate',
      );
    }
    if (how !== 'returned' && !cancelled && ctx.interruptRequested) {
      this.#fail(
        'interrupt-recovery-reply',
        watched.runId,
        `threw after its interrupt (${String(how)}) instead of ending with a recovery reply`,
      );
    }
  }

  /** Checks the time-bound invariants at the clock's current time. */
  checkBounds(): void {
    const now = this.clock.now();
    for (const watched of this.watched.values()) {
      const { runId } = watched;
      if (watched.settledAt === undefined && watched.abortedAt !== undefined) {
        const late = now - watched.abortedAt;
        if (late > this.#settleWithinMs) this.#lateSettle(watched, late);
      }
      if (watched.settledAt !== undefined) {
        for (const childId of watched.children) {
          const child = this.watched.get(childId);
          if (child === undefined || child.settledAt !== undefined) continue;
          const late = now - watched.settledAt;
          if (late > this.#settleWithinMs && child.abortedAt !== Number.POSITIVE_INFINITY) {
            this.#fail(
              'nested-settles-with-parent',
              child.runId,
              `has not settled ${late}ms after its parent ${runId} did (bound ${this.#settleWithinMs}ms)`,
            );
            child.abortedAt = Number.POSITIVE_INFINITY;
          }
        }
      }
      const bound = this.#safePointWithinMs;
      if (
        bound !== undefined &&
        watched.settledAt === undefined &&
        watched.run?.status === 'RUNNING' &&
        now - watched.lastSafePointAt > bound
      ) {
        this.#fail(
          'safe-point-within-bound',
          runId,
          `reached no safe point for ${now - watched.lastSafePointAt}ms while RUNNING (promised every ${bound}ms)`,
        );
        watched.lastSafePointAt = Number.POSITIVE_INFINITY; // report once
      }
    }
  }

  /** Checks what only the outcomes tell, once every run has ended. */
  checkOutcomes(): void {
    for (const watched of this.watched.values()) {
      const outcome = watched.outcome;
      const abandoned = outcome?.status === 'CANCELLED' && outcome.unsettled === true;
      if (abandoned && watched.abortedAt !== Number.POSITIVE_INFINITY) {
        this.#fail(
          watched.parentRunId === undefined ? 'cancel-settles' : 'nested-settles-with-parent',
          watched.runId,
          'was abandoned by the runtime (its agent never settled after the cancel)',
        );
      }
    }
  }
}
