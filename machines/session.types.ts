/**
 * The session machine's types: its input, context and events, and how a busy session handles a
 * new run (docs/architecture.md, "Sessions and the busy-session rule").
 *
 * @module
 */
import type { ChildIds } from './child-ids.js';
import type { RunQueue } from './run-queue.js';
import type { RunMachineInput } from './run.types.js';

/** How a run that arrives while the session is busy is handled. */
export type SessionStrategy = 'enqueue' | 'reject' | 'interrupt' | 'preempt';

/** Identifies the session and bounds it. */
export interface SessionMachineInput {
  readonly ownerId: string;
  readonly sessionId: string;
  /** Cap on the session's runs that have not settled (prepared, queued, running). */
  readonly maxQueuedRuns: number;
}

/** What the session remembers. `queue` is mutated in place (see {@link RunQueue}). */
export interface SessionMachineContext {
  readonly ownerId: string;
  readonly sessionId: string;
  readonly maxQueuedRuns: number;
  readonly queue: RunQueue;
  /**
   * The runs' child actor ids (recycled; see {@link ChildIds}), mutated in place: one per run
   * spawned and not yet settled, so `children.size` is the count the cap bounds.
   */
  readonly children: ChildIds;
  /**
   * The run holding the session's slot. Set and cleared in place by the per-run actions
   * (`setActiveToStarted`, `forgetActiveRun`), like the tables: an `assign` rebuilds the whole
   * snapshot (its state value, tags and context), about 2.2 KB of garbage per assign, and these
   * two ran once for every run (bench/run-steps.bench.ts). `admitHead` still assigns it.
   */
  readonly activeRunId: string | undefined;
  /** Grace of the pending `interrupt` strategy, in ms. */
  readonly graceMs: number;
  /**
   * The newer runs whose `interrupt` strategy waits for the active run's end (the grace runs
   * while any of them does).
   */
  readonly interruptingRunIds: readonly string[];
}

/** Events the session machine accepts. Times are absolute clock milliseconds. */
export type SessionMachineEvent =
  /** `prepare()`: spawn the run as a child, in CREATED (refused when the session is full). */
  | { type: 'session.prepare'; run: RunMachineInput }
  /** `run.start()`: decide about the run (see the table in the module note). */
  | {
      type: 'session.start';
      runId: string;
      at: number;
      strategy: SessionStrategy;
      /** For `interrupt` and `preempt`: how long the active run gets before it is cancelled. */
      graceMs: number;
    }
  | { type: 'session.slot_granted' };

/** A child's end as the session receives it (`xstate.done.actor.*` / `xstate.error.actor.*`). */
export type RunEndEvent =
  | { type: `xstate.done.actor.${string}`; actorId: string; output: unknown }
  | { type: `xstate.error.actor.${string}`; actorId: string; error: unknown };

/** Parameters of the `reportRunError` action. */
export interface RunErrorParams {
  readonly runId: string;
  readonly error: unknown;
}
