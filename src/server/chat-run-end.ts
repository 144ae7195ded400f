/**
 * How the chat page words the end of a run: a status (its pill's colour) and a reason, from the
 * run's last event alone (`run.completed`, `run.cancelled`, `run.failed`; README "Events").
 *
 * @module
 */

/** What the page shows for a run that ended. */
export interface RunEndView {
  /**
   * The pill's status, one colour each: `completed`, `stopped` (by you), `replaced` (by a newer
   * message: preempted, or the session's `interrupt`/`reject` strategy), `timed-out`,
   * `shutdown`, `crashed`, `failed`, `cancelled` (any other cancel).
   */
  readonly outcome:
    | 'completed'
    | 'stopped'
    | 'replaced'
    | 'timed-out'
    | 'shutdown'
    | 'crashed'
    | 'failed'
    | 'cancelled';
  /** The pill's text, a few words. */
  readonly label: string;
  /** One sentence under the reply saying what happened; empty for a plain completion. */
  readonly reason: string;
}

/**
 * Describes a run's end for a person.
 *
 * @remarks Inlined into the chat page with `Function.prototype.toString`, so it uses nothing
 * from module scope. Reads `initiator` (who asked) first and falls back on `cause` for logs
 * written before `initiator` existed.
 * @param type - `run.completed`, `run.cancelled` or `run.failed`
 * @param payload - the event's payload
 * @param started - whether the run had started (a reply may be cut off) or never ran
 * @returns the {@link RunEndView}; `undefined` for any other event type
 * @throws never
 */
export function describeRunEnd(
  type: string,
  payload: Record<string, unknown>,
  started: boolean,
): RunEndView | undefined {
  const cut = started ? ' The reply ends where it was cut off.' : ' It never started.';
  if (type === 'run.completed') {
    if (payload.reason !== 'interrupted')
      return { outcome: 'completed', label: 'Completed', reason: '' };
    if (payload.initiator === 'shutdown') {
      return {
        outcome: 'shutdown',
        label: 'Stopped by shutdown',
        reason: 'The server was shutting down, so the reply was wrapped up early.',
      };
    }
    if (payload.initiator === 'strategy') {
      return {
        outcome: 'replaced',
        label: 'Interrupted',
        reason: 'A newer message interrupted this reply; it was wrapped up early.',
      };
    }
    return {
      outcome: 'stopped',
      label: 'Stopped by you',
      reason: 'You stopped this reply; it was wrapped up early.',
    };
  }
  if (type === 'run.failed') {
    const error = typeof payload.error === 'string' ? payload.error : 'unknown error';
    // The log's error ("the server process stopped while the run was RUNNING") says the same
    // thing in the runtime's words: the reason says it once, plainly.
    if (payload.cause === 'crashed') {
      return {
        outcome: 'crashed',
        label: 'Crashed',
        reason: started
          ? 'The server stopped while this reply was being written.'
          : 'The server stopped before this message started.',
      };
    }
    if (payload.code === 'CONTEXT_OVER_BUDGET') {
      return {
        outcome: 'failed',
        label: 'Too long',
        reason: `This message is too long for the model's context; send a shorter one (${error}).`,
      };
    }
    return { outcome: 'failed', label: 'Failed', reason: `The agent failed: ${error}` };
  }
  if (type !== 'run.cancelled') return undefined;
  const initiator =
    typeof payload.initiator === 'string'
      ? payload.initiator
      : (
          { timeout: 'timeout', shutdown: 'shutdown', preempt: 'preempt' } as Record<string, string>
        )[String(payload.cause)];
  switch (initiator) {
    case 'user':
      return started
        ? {
            outcome: 'stopped',
            label: 'Stopped by you',
            reason: 'You stopped this reply. It ends where it was cut off.',
          }
        : {
            outcome: 'stopped',
            label: 'Cancelled by you',
            reason: 'You cancelled this message before it started.',
          };
    case 'preempt':
      return {
        outcome: 'replaced',
        label: 'Preempted',
        reason: `A newer message took over (preempt).${cut}`,
      };
    case 'strategy':
      return payload.reason === 'session busy'
        ? {
            outcome: 'replaced',
            label: 'Refused: busy',
            reason: 'The session was busy and takes one message at a time (reject).',
          }
        : {
            outcome: 'replaced',
            label: 'Replaced',
            reason: `A newer message interrupted this one and its grace period ran out.${cut}`,
          };
    case 'timeout':
      return {
        outcome: 'timed-out',
        label: 'Timed out',
        reason: `The run reached its time limit.${cut}`,
      };
    case 'shutdown':
      return {
        outcome: 'shutdown',
        label: 'Stopped by shutdown',
        reason: `The server was shutting down.${cut}`,
      };
    case 'parent':
      return {
        outcome: 'cancelled',
        label: 'Cancelled',
        reason: `Its parent run was cancelled.${cut}`,
      };
    default:
      return {
        outcome: 'cancelled',
        label: 'Cancelled',
        reason: `This message was cancelled.${cut}`,
      };
  }
}
