/**
 * Crash recovery: runs that a dead process left unfinished are marked FAILED with cause
 * `crashed`, and their sessions' logs say so (docs/architecture.md, "Event log and HTTP service").
 *
 * @module
 */
import { terminalRunStatuses, type RunStatus } from '../../machines/run.machine.js';
import type { Clock } from '../clock.js';
import type { EventLog } from '../events/event-log.js';
import type { RunRecordOutcome, RunRecords } from '../stores/run-records.js';

/** One run marked as crashed. */
export interface CrashedRun {
  readonly runId: string;
  readonly ownerId: string;
  readonly sessionId: string;
  /** The status the run had when the process died (`CREATED`, `QUEUED` or `RUNNING`). */
  readonly status: string;
}

const outcomeOf = (
  status: 'COMPLETED' | 'FAILED' | 'CANCELLED',
  payload: Readonly<Record<string, unknown>>,
): RunRecordOutcome => {
  const text = (value: unknown) => (typeof value === 'string' ? value : undefined);
  if (status === 'COMPLETED') return { status, reason: text(payload.reason) };
  if (status === 'FAILED') return { status, error: text(payload.error) };
  return {
    status,
    cause: text(payload.cause),
    reason: text(payload.reason),
    escalated: payload.escalated === true,
  };
};

/**
 * Finishes every unfinished run record that a dead process left behind.
 *
 * @remarks A record is written when a run is created and when it has settled; its live
 * statuses are in the event log. So for each unfinished record the log tells how far the run
 * got: one whose last `run.status` is terminal (it ended, but its agent had not settled when
 * the process died) gets that outcome; any other (`CREATED`, `QUEUED`, `RUNNING`) is marked
 * FAILED with cause `crashed`, and its session's log gets `run.status {from, to: 'FAILED'}` and
 * `run.failed {error, cause: 'crashed'}`, after everything the dead process logged.
 *
 * Call it once on start, before the service takes requests: no run of this process exists
 * yet, so every unfinished record belongs to a process that is gone.
 *
 * @param deps - `runs`: the run records; `eventLog`: the sessions' log; `clock`: for `at`
 * @returns the runs it marked as crashed, oldest first
 * @throws {@link RunplaneError} (`STORE_FAILED`) when a store fails
 */
export async function recoverCrashedRuns(deps: {
  runs: RunRecords;
  eventLog: EventLog;
  clock: Clock;
}): Promise<CrashedRun[]> {
  const crashed: CrashedRun[] = [];
  for (const record of deps.runs.listUnfinished()) {
    const at = deps.clock.now();
    const key = { ownerId: record.ownerId, sessionId: record.sessionId };
    const logged = await deps.eventLog.read({}, key, { runId: record.runId });
    const lastStatus = logged.filter((e) => e.type === 'run.status').at(-1)?.payload.to;
    const status = typeof lastStatus === 'string' ? (lastStatus as RunStatus) : record.status;
    if (terminalRunStatuses.has(status)) {
      const terminal = status as 'COMPLETED' | 'FAILED' | 'CANCELLED';
      const event = logged.filter((e) => e.type === `run.${terminal.toLowerCase()}`).at(-1);
      deps.runs.finish(record.runId, outcomeOf(terminal, event?.payload ?? {}), at);
      continue;
    }
    const error = `the server process stopped while the run was ${status}`;
    deps.eventLog.append({}, key, {
      runId: record.runId,
      type: 'run.status',
      payload: { from: status, to: 'FAILED' },
      at,
    });
    deps.eventLog.append({}, key, {
      runId: record.runId,
      type: 'run.failed',
      payload: { error, cause: 'crashed' },
      at,
    });
    deps.runs.finish(record.runId, { status: 'FAILED', cause: 'crashed', error }, at);
    crashed.push({ ...key, runId: record.runId, status });
  }
  return crashed;
}
