/**
 * Crash recovery: runs that a dead process left QUEUED or RUNNING (or CREATED) are marked
 * FAILED with cause `crashed`, and their sessions' logs say so (DESIGN.md §11).
 *
 * @module
 */
import type { Clock } from '../clock.js';
import type { EventLog } from '../events/event-log.js';
import type { RunRecords } from '../stores/run-records.js';

/** One run marked as crashed. */
export interface CrashedRun {
  readonly runId: string;
  readonly ownerId: string;
  readonly sessionId: string;
  /** The status the run had when the process died. */
  readonly status: string;
}

/**
 * Marks every unfinished run record as FAILED (cause `crashed`) and logs, in its session,
 * `run.status {from, to: 'FAILED'}` and `run.failed {error, cause: 'crashed'}`.
 *
 * @remarks Call it once on start, before the service takes requests: no run of this process
 * exists yet, so every unfinished record belongs to a process that is gone. The events take
 * the next `seq` of their session, after everything the dead process logged.
 *
 * @param deps - `runs`: the run records; `eventLog`: the sessions' log; `clock`: for `at`
 * @returns the runs it marked, oldest first
 * @throws {@link RunplaneError} (`STORE_FAILED`) when a store fails
 */
export function recoverCrashedRuns(deps: {
  runs: RunRecords;
  eventLog: EventLog;
  clock: Clock;
}): CrashedRun[] {
  const crashed: CrashedRun[] = [];
  for (const record of deps.runs.listUnfinished()) {
    const at = deps.clock.now();
    const key = { ownerId: record.ownerId, sessionId: record.sessionId };
    const error = `the server process stopped while the run was ${record.status}`;
    deps.eventLog.append({}, key, {
      runId: record.runId,
      type: 'run.status',
      payload: { from: record.status, to: 'FAILED' },
      at,
    });
    deps.eventLog.append({}, key, {
      runId: record.runId,
      type: 'run.failed',
      payload: { error, cause: 'crashed' },
      at,
    });
    deps.runs.finish(record.runId, { status: 'FAILED', cause: 'crashed', error }, at);
    crashed.push({ ...key, runId: record.runId, status: record.status });
  }
  return crashed;
}
