/**
 * Who asked a run to stop: the `initiator` of its `run.cancelled` event, and of its
 * `run.completed` event when it ended interrupted (README "Events").
 *
 * @module
 */
import type { RunMachineContext } from '../../machines/run.types.js';

/**
 * Who asked for a run's cancel or interrupt.
 *
 * - `user`: the caller (`run.cancel()`, `runs.cancel/interrupt`, `user.interrupt` over HTTP, a
 *   TurnLoop's `stop`), or an `AbortSignal` the caller passed at prepare time;
 * - `strategy`: the session's multitask strategy for a newer run (`reject`, or `interrupt` and
 *   its cancel once `graceMs` is over);
 * - `preempt`: a newer run or pushed item that preempts (`strategy: 'preempt'`, TurnLoop
 *   `push(item, { preempt: true })`);
 * - `timeout`: the run's own total deadline;
 * - `shutdown`: the runtime shutting down;
 * - `parent`: the nested run's parent run (its cancel flowed down, or it ended).
 */
export type RunInitiator = 'user' | 'strategy' | 'preempt' | 'timeout' | 'shutdown' | 'parent';

/**
 * The session machine's words for what its `interrupt` strategy asks of the active run (the
 * interrupt's message, and the reason of the cancel after `graceMs`); a test pins them.
 */
const byNewerRun = 'interrupted by a newer run';

/**
 * @internal Who cancelled a run, from its context as it enters CANCELLED.
 *
 * @param context - the run's context, its cancel request recorded
 * @returns the {@link RunInitiator}
 */
export function cancelInitiatorOf(context: RunMachineContext): RunInitiator {
  const cause = context.cause ?? context.cancel?.cause ?? 'cancel';
  if (cause === 'timeout' || cause === 'shutdown') return cause;
  if (context.parentRunId !== undefined) return 'parent';
  if (cause === 'preempt') return 'preempt';
  if (context.verdict === 'rejected') return 'strategy';
  if (context.cancel?.reason?.startsWith(byNewerRun) === true) return 'strategy';
  return 'user';
}

/**
 * @internal Who interrupted a run that completed interrupted.
 *
 * @param context - the run's context as it enters COMPLETED with its interrupt raised
 * @returns `shutdown`, `strategy` (the session's `interrupt` strategy) or `user`
 */
export function interruptInitiatorOf(context: RunMachineContext): RunInitiator {
  if (context.interrupt?.cause === 'shutdown') return 'shutdown';
  if (context.interrupt?.message === byNewerRun) return 'strategy';
  return 'user';
}
