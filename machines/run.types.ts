/**
 * The run machine's types: its input, context, events and output (docs/architecture.md, "A
 * run's life").
 *
 * @module
 */
import type { CancelCause, CancelRequest, RunInitiator, SafePointKind } from './cancel-request.js';
import type { ChildIds } from './child-ids.js';

/** The six statuses of a run. */
export type RunStatus = 'CREATED' | 'QUEUED' | 'RUNNING' | 'COMPLETED' | 'FAILED' | 'CANCELLED';

/** Statuses after which nothing changes any more. */
export const terminalRunStatuses: ReadonlySet<RunStatus> = new Set([
  'COMPLETED',
  'FAILED',
  'CANCELLED',
]);

/** Why an interrupt reached a RUNNING run: a user (or a newer run's strategy), or a shutdown. */
export type InterruptCause = 'interrupt' | 'shutdown';

/** What a session decided about a run that starts (see the session machine). */
export type AdmissionVerdict = 'admitted' | 'queued' | 'rejected';

/** What the run's actor is created with. */
export interface RunMachineInput {
  readonly runId: string;
  readonly ownerId: string;
  readonly sessionId: string;
  /** The run that spawned this one (`ctx.spawn`); `undefined` for a session's run. */
  readonly parentRunId?: string | undefined;
  /** Total budget from `run.start` to a terminal status, queue time included (ms). */
  readonly timeoutMs?: number | undefined;
  /** How long a cancelled executor may take to settle before it is abandoned (ms). */
  readonly unwindTimeoutMs: number;
  /** Cap on nested runs of this run that have not settled. */
  readonly maxNestedRuns: number;
}

/** A run's fixed budgets (ms) and caps, from its input. */
interface RunLimits {
  readonly timeoutMs: number | undefined;
  readonly unwindTimeoutMs: number;
  readonly maxNestedRuns: number;
}

/**
 * Everything the run machine remembers.
 *
 * @remarks Keep it under 20 fields: every `assign` copies the context with `Object.assign`, and
 * on V8 (Node 20) an object of 20 or more properties copied that way costs about ten times as
 * much (1.7 µs → 20 µs measured here), which alone doubled a run's lifecycle. Fixed values are
 * grouped (`limits`), and so are rarely read ones (`interrupt`).
 */
export interface RunMachineContext {
  readonly runId: string;
  readonly ownerId: string;
  readonly sessionId: string;
  readonly parentRunId: string | undefined;
  readonly limits: RunLimits;
  /**
   * The status a user sees. It turns terminal at once; the machine reaches its final state
   * (`settled`) only once the executor and every nested run have settled.
   */
  readonly status: RunStatus;
  /** Absolute time (clock ms) of the total deadline, set by `run.start`. */
  readonly deadlineAt: number | undefined;
  /**
   * The merge of every cancel request so far (pending while in `cancelling`). A request that
   * changes nothing leaves the very same object, so a caller tells `contributed` by identity.
   */
  readonly cancel: CancelRequest | undefined;
  readonly interruptRequested: boolean;
  /** The first interrupt of the RUNNING run: its message, its cause and who asked. */
  readonly interrupt:
    | {
        readonly message: string | undefined;
        readonly cause: InterruptCause;
        readonly initiator: RunInitiator;
      }
    | undefined;
  /**
   * What the session decided when the run started: `admitted` (it passes QUEUED in the same
   * step), `queued`, or `rejected` (`reject` strategy while busy: CANCELLED at once).
   */
  readonly verdict: AdmissionVerdict | undefined;
  /**
   * The agent executor: `idle` (never started: a run cancelled before RUNNING has none),
   * `running`, `settled` (it returned or threw) or `abandoned` (past `unwindTimeoutMs`).
   */
  readonly executor: 'idle' | 'running' | 'settled' | 'abandoned';
  /** Set on entering CANCELLED. */
  readonly cause: CancelCause | undefined;
  /** A safe-point cancel that hit its deadline, or an immediate cancel that overrode one. */
  readonly escalated: boolean;
  readonly output: unknown;
  readonly error: unknown;
  /**
   * The nested runs (child actors) that have not reached their final state, child id ↔ run id
   * (made by the first `ctx.spawn`; see {@link ChildIds}).
   */
  readonly nested: ChildIds | undefined;
  /** Counts escalation timers, so each gets a fresh child id. */
  readonly timerSeq: number;
}

/** Events the run machine accepts. Times are absolute clock milliseconds. */
export type RunMachineEvent =
  /** From the session: the run starts, with the session's verdict on it. */
  | { type: 'run.start'; at: number; verdict: AdmissionVerdict }
  /** From the session: the run's turn has come. */
  | { type: 'run.admit' }
  | { type: 'run.cancel'; request: CancelRequest }
  /** `initiator`: who asked (`user` when absent); the session's `interrupt` strategy says `strategy`. */
  | {
      type: 'run.interrupt';
      message?: string | undefined;
      cause?: InterruptCause | undefined;
      initiator?: RunInitiator | undefined;
    }
  | { type: 'run.safe_point'; kind: SafePointKind }
  /** From the executor (`ctx.spawn`): spawn nested run `runId` as a child and start it. */
  | { type: 'run.spawn'; runId: string; timeoutMs: number | undefined; at: number }
  | { type: 'run.deadline' }
  | { type: 'run.cancel_deadline' }
  | { type: 'agent.done'; output: unknown }
  | { type: 'agent.error'; error: unknown };

/**
 * The settled outcome of a run: the run actor's `output` once it reaches its final state.
 *
 * @remarks `unsettled: true` means the agent ignored its AbortSignal for longer than
 * `unwindTimeoutMs` and was abandoned.
 */
export type RunMachineOutput =
  | { readonly status: 'COMPLETED'; readonly output: unknown; readonly interrupted: boolean }
  | { readonly status: 'FAILED'; readonly error: unknown }
  | {
      readonly status: 'CANCELLED';
      readonly cause: CancelCause;
      readonly reason: string | undefined;
      readonly escalated: boolean;
      readonly unsettled: boolean;
    };

/** Parameters of the `abortExecutor` action: why the run's AbortSignal fires. */
export interface ExecutorAbortParams {
  readonly cause: CancelCause;
  readonly reason: string | undefined;
}

/** Parameters of the `logStatus` action: one status change. */
export interface StatusChange {
  readonly from: RunStatus;
  readonly to: RunStatus;
  /** For `to: 'FAILED'`: what the agent threw. */
  readonly error?: unknown;
}
