/**
 * Who asked a run to stop: the `initiator` of its `run.cancelled` event, and of its
 * `run.completed` event when it ended interrupted (README "Events").
 *
 * @remarks Read from data only: every cancel request and interrupt carries its `initiator`
 * (machines/cancel-request.ts); no reason text is parsed.
 *
 * @module
 */
import type { RunInitiator } from '../../machines/cancel-request.js';
import type { RunMachineContext } from '../../machines/run.types.js';

export type { RunInitiator } from '../../machines/cancel-request.js';

/**
 * @internal Who cancelled a run, from its context as it enters CANCELLED: its own deadline or a
 * runtime shutdown first (they win over a pending request), then a nested run's parent, then
 * the initiator its cancel request carries.
 *
 * @param context - the run's context, its cancel request recorded
 * @returns the {@link RunInitiator}
 */
export function cancelInitiatorOf(context: RunMachineContext): RunInitiator {
  const cause = context.cause ?? context.cancel?.cause;
  if (cause === 'timeout' || cause === 'shutdown') return cause;
  if (context.parentRunId !== undefined) return 'parent';
  return context.cancel?.initiator ?? 'user';
}

/**
 * @internal Who interrupted a run that completed interrupted: the first interrupt's initiator.
 *
 * @param context - the run's context as it enters COMPLETED with its interrupt raised
 * @returns the {@link RunInitiator}
 */
export function interruptInitiatorOf(context: RunMachineContext): RunInitiator {
  return context.interrupt?.initiator ?? 'user';
}
