/**
 * What a run ended as.
 *
 * @module
 */
import type { RunMachineOutput } from '../../machines/run.types.js';

/**
 * The settled outcome of a run, resolved by `run.termination`.
 *
 * @remarks `unsettled: true` means the agent ignored its AbortSignal for longer than
 * `unwindTimeoutMs` and was abandoned; anything it does afterwards is fenced off.
 */
export type RunOutcome<TOutput = unknown> =
  | { readonly status: 'COMPLETED'; readonly output: TOutput; readonly interrupted: boolean }
  | Exclude<RunMachineOutput, { readonly status: 'COMPLETED' }>;

/** What a cancel request ended as: landed, landed by escalation, or found the run ended. */
export type CancelOutcome = 'cancelled' | 'escalated' | 'ended';

/** The answer of `run.cancel()`. */
export interface CancelResult {
  /** Whether this request changed anything (a new or stronger cancel). */
  readonly contributed: boolean;
  /** Resolves once the run is terminal. */
  readonly outcome: Promise<CancelOutcome>;
}
