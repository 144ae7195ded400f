/**
 * What a run's status changes write to its session's event log (README "Events"): one rule,
 * called by the run machine's `logStatus` action.
 *
 * @module
 */
import type { RunMachineContext, StatusChange } from '../../machines/run.types.js';
import type { ModelUsage } from '../observability/run-telemetry.js';
import { cancelInitiatorOf, interruptInitiatorOf } from './run-initiator.js';

/**
 * @internal Appends the events of one status change, in log order: `session.run_queued` /
 * `session.run_started` (session runs only), `run.status {from, to}`, then `run.completed
 * {reason, initiator?, usage?}` (`initiator` when interrupted; `usage` when the agent's model
 * calls reported any), `run.failed {error}` or `run.cancelled
 * {cause, escalated, reason, initiator}` (who asked: `RunInitiator` in run-initiator.ts).
 *
 * @param append - logs one event of the run
 * @param context - the run's context as it leaves its status (its cancel request recorded)
 * @param change - `{ from, to }`
 * @param usage - the run's model usage so far, for `run.completed`
 */
export function logStatusChange(
  append: (type: string, payload: Record<string, unknown>) => void,
  context: RunMachineContext,
  { from, to, error }: StatusChange,
  usage?: ModelUsage,
): void {
  const inSession = context.parentRunId === undefined;
  if (to === 'QUEUED' && inSession) append('session.run_queued', { run_id: context.runId });
  if (to === 'RUNNING' && inSession) append('session.run_started', { run_id: context.runId });
  append('run.status', { from, to });
  if (to === 'COMPLETED') {
    const payload: Record<string, unknown> = context.interruptRequested
      ? { reason: 'interrupted', initiator: interruptInitiatorOf(context) }
      : { reason: 'completed' };
    if (usage !== undefined) payload.usage = usage;
    append('run.completed', payload);
  } else if (to === 'FAILED') {
    const code = codeOf(error);
    append(
      'run.failed',
      code === undefined ? { error: describeError(error) } : { error: describeError(error), code },
    );
  } else if (to === 'CANCELLED') {
    append('run.cancelled', {
      cause: context.cause ?? context.cancel?.cause ?? 'cancel',
      escalated: context.escalated,
      reason: context.cancel?.reason ?? null,
      initiator: cancelInitiatorOf(context),
    });
  }
}

/** The stable `code` of what an agent threw (a `RunplaneError`'s, say), if it has a string one. */
function codeOf(error: unknown): string | undefined {
  try {
    const code = (error as { code?: unknown } | null)?.code;
    return typeof code === 'string' ? code : undefined;
  } catch {
    return undefined;
  }
}

/**
 * @internal What an agent threw, as text for the log. Never throws: an agent may throw anything,
 * including a value `String()` cannot convert (`Object.create(null)`).
 */
export function describeError(error: unknown): string {
  try {
    return error instanceof Error ? error.message : String(error);
  } catch {
    return Object.prototype.toString.call(error);
  }
}
