/**
 * How a session moves between the instances of a cluster (docs/architecture.md, "Cluster on
 * Redis", "Moving a lease"): what an instance does when it takes a session's lease (rebuild the
 * session from its records), when it loses one (stop its work there, writing nothing), and when
 * it drains (hand its sessions to the others). The lease, the fenced writes and the command
 * Stream are `cluster-instance.ts`'s and `cluster-session-access.ts`'s; this is the runtime's
 * side of them.
 *
 * - **Take** (`rebuild`): the session's unfinished runs, as recorded, oldest first: one whose log
 *   already ends it gets that outcome; one that was running on the last holder is marked (the
 *   failover policy `mark`): CANCELLED when a cancel was pending, else FAILED with cause
 *   `owner_lost`, or, in a session with the policy `resume`, started again under its own id
 *   from its last recorded safe point (`failover-resume.ts`), first, while it has attempts
 *   left; one still waiting goes back in the queue under its own id, in order, after it. A loop
 *   session's turn is marked the same way and its loop resumes from its checkpoint and log.
 * - **Lose** (`abandon`): the session's live runs here are cancelled, their writes refused
 *   (`STALE_FENCE`), its loop stopped without a checkpoint: the next holder goes on from Redis.
 * - **Hand off** (`detach`): a draining instance detaches its sessions' waiting runs (their
 *   cancel here writes nothing), so Redis still holds them waiting for the next holder.
 *
 * @module
 * @internal
 */
import { terminalRunStatuses, type RunStatus } from '../../machines/run.machine.js';
import type { Clock } from '../clock.js';
import { StaleFenceError } from '../errors.js';
import type { EventLog, NewEvent, RunplaneEvent, SessionKey } from '../events/event-log.js';
import type { Runtime } from '../runtime/runtime-types.js';
import type { RunRecord, RunRecordOutcome, RunRecords } from '../stores/run-records.js';
import type { SessionRecord, SessionRecords } from '../stores/session-records.js';
import type { Service } from '../server/service-app.js';
import type { SessionAccess, SessionCommand } from '../server/session-access.js';
import type { ClusterInstance } from './cluster-instance.js';
import {
  attemptField,
  parseAttempt,
  parseRecordedSafePoint,
  resumeStateField,
  type RecordedSafePoint,
} from './failover-resume.js';
import { unlistSession } from './session-watch.js';

/** The run record field of a cancel accepted while the run was live (JSON `{reason, at}`). */
const cancelRequestField = 'cancelRequest';

/** The log types that tell how far each run got. */
const runEndTypes = ['run.status', 'run.completed', 'run.failed', 'run.cancelled'];

/** What the runtime's writes pass through: refuses a detached run's, skips a requeued run's queueing. */
export interface HandoffFilter {
  /** The event log the runtime writes to. */
  readonly eventLog: EventLog;
  /** The run records the service writes to. */
  readonly runs: RunRecords;
  /**
   * From now on the run's writes are refused (`STALE_FENCE`): its session moves on without it.
   * The run is forgotten once `settled` has and its last writes were refused.
   */
  detach(runId: string, settled: Promise<unknown>): void;
  /**
   * The run's writes go through again: this instance took its session back, its detached run
   * here has ended, and the rebuild marks or requeues it under the new fence.
   */
  reattach(runId: string): void;
  /** The run's queueing (`run.status` to QUEUED, `session.run_queued`) is already logged: skip it once. */
  requeued(runId: string): void;
  /**
   * The run is resumed (failover policy `resume`): its last attempt's queueing and start
   * (`session.run_queued`, `run.status` to QUEUED, `session.run_started`, `run.status` to
   * RUNNING) are already logged, and `run.resumed` marks the new attempt: skip them once.
   */
  resumed(runId: string): void;
}

/**
 * @internal Wraps the instance's event log and run records: a detached run writes nothing, and
 * a requeued run does not log its queueing a second time.
 */
export function createHandoffFilter(eventLog: EventLog, runs: RunRecords): HandoffFilter {
  const detached = new Set<string>();
  /** Run id → the queueing events still to skip. */
  const skips = new Map<string, Set<string>>();
  const refuse = (key: SessionKey, runId: string) =>
    new StaleFenceError(key.ownerId, key.sessionId, 0, 'not_held', `run ${runId} was handed off`);
  const kindOf = (event: NewEvent) =>
    event.type === 'run.status' ? `run.status:${String(event.payload?.to)}` : event.type;

  const filtered: EventLog = Object.create(eventLog) as EventLog;
  Object.assign(filtered, {
    append(
      ctx: Parameters<EventLog['append']>[0],
      key: SessionKey,
      event: NewEvent,
    ): RunplaneEvent {
      const { runId } = event;
      if (runId !== undefined) {
        if (detached.has(runId)) throw refuse(key, runId);
        const skip = skips.get(runId);
        if (skip?.delete(kindOf(event)) === true) {
          if (skip.size === 0) skips.delete(runId);
          // Logged by the holder that queued it: the same event, not a second one.
          const seq = eventLog.lastSeq(ctx, key);
          return {
            ...event,
            payload: event.payload ?? {},
            seq,
            id: String(seq),
            sessionId: key.sessionId,
          };
        }
        // Past its queueing (started, or ended while waiting): nothing is left to skip.
        if (skip !== undefined && event.type === 'run.status') skips.delete(runId);
      }
      return eventLog.append(ctx, key, event);
    },
    // The runtime refuses a run id its session logged: a requeued run's was, by its last holder.
    hasRun: (ctx: Parameters<EventLog['hasRun']>[0], key: SessionKey, runId: string) =>
      !skips.has(runId) && eventLog.hasRun(ctx, key, runId),
  });
  const guardedRuns: RunRecords = {
    create: (record) => runs.create(record),
    setStatus: (runId, status, at) => !detached.has(runId) && runs.setStatus(runId, status, at),
    finish: (runId, outcome, at) => !detached.has(runId) && runs.finish(runId, outcome, at),
    get: (ownerId, runId) => runs.get(ownerId, runId),
    listUnfinished: () => runs.listUnfinished(),
  };
  return {
    eventLog: filtered,
    runs: guardedRuns,
    detach(runId, settled) {
      detached.add(runId);
      // After the outcome's record write (registered on the run's termination before this).
      void settled.then(
        () => detached.delete(runId),
        () => detached.delete(runId),
      );
    },
    reattach: (runId) => void detached.delete(runId),
    requeued: (runId) =>
      void skips.set(runId, new Set(['run.status:QUEUED', 'session.run_queued'])),
    resumed: (runId) =>
      void skips.set(
        runId,
        new Set([
          'run.status:QUEUED',
          'session.run_queued',
          'run.status:RUNNING',
          'session.run_started',
        ]),
      ),
  };
}

/** The outcome a run's log ends it with, as `recover.ts` reads it. */
function loggedOutcome(status: RunStatus, end: RunplaneEvent | undefined): RunRecordOutcome {
  const payload = end?.payload ?? {};
  const text = (value: unknown) => (typeof value === 'string' ? value : undefined);
  if (status === 'COMPLETED') return { status, reason: text(payload.reason) };
  if (status === 'FAILED')
    return { status, error: text(payload.error), cause: text(payload.cause) };
  return { status: 'CANCELLED', cause: text(payload.cause), reason: text(payload.reason) };
}

/** What a rebuild did to a session's unfinished runs. */
export interface RebuildReport {
  /** Runs ended here because they were running on the last holder. */
  readonly marked: string[];
  /** Runs put back in the queue, in order. */
  readonly requeued: string[];
  /** Runs resumed from their last recorded safe point (failover policy `resume`), first. */
  readonly resumed: string[];
  /** Whether the session has work here now (runs or a loop). */
  readonly busy: boolean;
}

/** What a rebuild needs. */
export interface HandoffDeps {
  readonly cluster: ClusterInstance;
  readonly runtime: Runtime;
  /** The service (built after the access: read when a session is taken). */
  readonly service: () => Service;
  /** The holder's run records (the mirror, unfiltered). */
  readonly runs: RunRecords;
  readonly sessions: SessionRecords;
  readonly filter: HandoffFilter;
  /** How many attempts a run of a `resume` session gets in all (`--failover-max-attempts`). */
  readonly failoverMaxAttempts: number;
}

/**
 * @internal Rebuilds a session this instance just took, from its records and log (see the
 * module's remarks). Call before any command of the session is applied here.
 *
 * @throws what the log read or a store threw (the lease is then given back by the caller)
 */
export async function rebuildSession(deps: HandoffDeps, key: SessionKey): Promise<RebuildReport> {
  const { runtime, runs } = deps;
  const session = deps.sessions.get(key.ownerId, key.sessionId);
  const records = runs
    .listUnfinished()
    .filter((record) => record.ownerId === key.ownerId && record.sessionId === key.sessionId);
  if (records.length === 0) {
    const resumed = session?.mode === 'loop' && (await deps.service().loopSessions.resume(key));
    return { marked: [], requeued: [], resumed: [], busy: resumed === true };
  }
  // Runs this instance drove under an earlier lease of the session are still unwinding: their
  // ids must be free before they are queued again.
  for (const record of records) {
    const live = runtime.runs.find(key.ownerId, key.sessionId, record.runId);
    if (live !== undefined) await live.termination.catch(() => undefined);
    // Detached when this instance lost the session before: the new fence's writes are its own.
    deps.filter.reattach(record.runId);
  }
  const logged = await runtime.eventLog.read({}, key, { types: runEndTypes });
  const lastStatus = new Map<string, RunStatus>();
  const ends = new Map<string, RunplaneEvent>();
  for (const event of logged) {
    if (event.runId === undefined) continue;
    if (event.type === 'run.status') lastStatus.set(event.runId, event.payload.to as RunStatus);
    else ends.set(event.runId, event);
  }
  const marked: string[] = [];
  const requeued: string[] = [];
  const resumed: string[] = [];
  const waiting: RunRecord[] = [];
  for (const record of records) {
    const status = lastStatus.get(record.runId) ?? record.status;
    const at = runtime.clock.now();
    if (terminalRunStatuses.has(status)) {
      runs.finish(record.runId, loggedOutcome(status, ends.get(record.runId)), at);
    } else if (session === undefined || session.mode === 'loop' || status === 'RUNNING') {
      // A deleted session's runs are marked too: its purge waits for them to end.
      const lost = await readLostRun(deps, key, record.runId);
      if (
        session?.mode === 'runs' &&
        session.failover === 'resume' &&
        status === 'RUNNING' &&
        lost.cancel === undefined &&
        lost.safePoint !== undefined &&
        lost.attempt < deps.failoverMaxAttempts
      ) {
        // First in the queue, before the waiting runs: it was running.
        resumeRun(deps, key, session, record, lost.safePoint, lost.attempt + 1);
        resumed.push(record.runId);
      } else {
        markLost(deps, key, record, status, lost);
        marked.push(record.runId);
      }
    } else {
      waiting.push(record);
    }
  }
  for (const record of waiting) {
    deps.filter.requeued(record.runId);
    deps.service().requeueRun(session!, record);
    requeued.push(record.runId);
  }
  const loop = session?.mode === 'loop' && (await deps.service().loopSessions.resume(key));
  return {
    marked,
    requeued,
    resumed,
    busy: requeued.length > 0 || resumed.length > 0 || loop,
  };
}

/** What the last holder left on a lost run's record: a pending cancel, its safe point, attempt. */
interface LostRun {
  readonly cancel: { reason: string | null } | undefined;
  readonly safePoint: RecordedSafePoint | undefined;
  /** The attempt that was running (1: the first). */
  readonly attempt: number;
}

async function readLostRun(deps: HandoffDeps, key: SessionKey, runId: string): Promise<LostRun> {
  const { cluster } = deps;
  const [cancel = null, safePoint = null, attempt = null] = await cluster.redis.hmget(
    cluster.keysOf(key).run(runId),
    cancelRequestField,
    resumeStateField,
    attemptField,
  );
  return {
    cancel: parseCancelRequest(cancel),
    safePoint: parseRecordedSafePoint(safePoint),
    attempt: parseAttempt(attempt),
  };
}

/**
 * Resumes a run whose holder was lost (failover policy `resume`): records its new attempt,
 * logs `run.resumed {attempt, safe_point, safe_point_at, safe_point_seq}` after everything the
 * last holder logged (`safe_point_seq`: the session's last `seq` at the safe point, so a
 * reader drops what the run logged after it, README "Cluster"), and starts
 * it again under its own id from its recorded safe point, the turn carried in its input (the
 * filter skips its queueing and start, already logged by its first attempt).
 */
function resumeRun(
  deps: HandoffDeps,
  key: SessionKey,
  session: SessionRecord,
  record: RunRecord,
  safePoint: RecordedSafePoint,
  attempt: number,
): void {
  const { runtime, cluster } = deps;
  cluster.write(key, { op: 'run.merge', runId: record.runId, fields: { [attemptField]: attempt } });
  runtime.eventLog.append({}, key, {
    runId: record.runId,
    type: 'run.resumed',
    payload: {
      attempt,
      safe_point: safePoint.kind,
      safe_point_at: safePoint.at,
      ...(safePoint.seq === undefined ? {} : { safe_point_seq: safePoint.seq }),
    },
    at: runtime.clock.now(),
  });
  deps.filter.resumed(record.runId);
  const input = { resume: safePoint.state, carried: true };
  deps.service().requeueRun(session, record, input);
}

/**
 * Ends a run whose holder was lost while it ran (failover policy `mark`): CANCELLED (cause
 * `cancel`, with its reason) when a cancel of it was accepted, else FAILED with cause
 * `owner_lost`; logged after everything the last holder logged, and recorded.
 */
function markLost(
  deps: HandoffDeps,
  key: SessionKey,
  record: RunRecord,
  from: RunStatus,
  { cancel, attempt }: LostRun,
): void {
  const { runtime } = deps;
  const at = runtime.clock.now();
  const append = (type: string, payload: Record<string, unknown>) =>
    runtime.eventLog.append({}, key, { runId: record.runId, type, payload, at });
  if (cancel !== undefined) {
    append('run.status', { from, to: 'CANCELLED' });
    append('run.cancelled', {
      cause: 'cancel',
      escalated: false,
      reason: cancel.reason,
      initiator: 'user',
      owner_lost: true,
    });
    deps.runs.finish(
      record.runId,
      { status: 'CANCELLED', cause: 'cancel', reason: cancel.reason ?? undefined },
      at,
    );
    return;
  }
  const error = `the instance running it stopped holding the session while the run was ${from}`;
  append('run.status', { from, to: 'FAILED' });
  // A run resumed before (failover policy `resume`) names the attempts it had.
  append('run.failed', {
    error,
    cause: 'owner_lost',
    ...(attempt > 1 ? { attempts: attempt } : {}),
  });
  deps.runs.finish(record.runId, { status: 'FAILED', cause: 'owner_lost', error }, at);
}

const parseCancelRequest = (json: string | null): { reason: string | null } | undefined => {
  if (json === null) return undefined;
  try {
    const value = JSON.parse(json) as { reason?: unknown };
    return { reason: typeof value.reason === 'string' ? value.reason : null };
  } catch {
    return { reason: null }; // a cancel was accepted; its reason is unreadable
  }
};

/** @internal Detaches a live run of `key` (see {@link HandoffFilter.detach}). */
export function detachRun(
  deps: Pick<HandoffDeps, 'runtime' | 'filter'>,
  key: SessionKey,
  runId: string,
): void {
  const run = deps.runtime.runs.find(key.ownerId, key.sessionId, runId);
  deps.filter.detach(runId, run?.termination ?? Promise.resolve());
}

/**
 * @internal Stops this instance's work on a session it no longer holds: its runs here are
 * detached (their writes refused) and cancelled, its loop stopped without a checkpoint.
 */
export async function abandonSession(deps: HandoffDeps, key: SessionKey): Promise<void> {
  const { runtime } = deps;
  const handle = runtime.session(key.ownerId, key.sessionId);
  const live = [
    ...handle.queuedRunIds,
    ...(handle.activeRunId === undefined ? [] : [handle.activeRunId]),
  ];
  for (const runId of live) detachRun(deps, key, runId);
  handle.cancelAll({ includeActive: true });
  await deps.service().loopSessions.abandon(key);
}

/** A run id and the reason of each `user.interrupt` a command's answer accepted. */
function acceptedCancels(command: SessionCommand, answer: unknown) {
  if (command.type !== 'session.apply_events') return [];
  const results = (answer as { results?: ReadonlyArray<Record<string, unknown>> }).results ?? [];
  return command.events.flatMap((event, index) => {
    const result = results[index];
    if (event.type !== 'user.interrupt' || result?.result !== 'accepted') return [];
    if (typeof result.run_id !== 'string') return [];
    const mode = (event.payload as { mode?: string } | undefined)?.mode;
    if (mode === 'interrupt') return []; // an interrupt ends the run as COMPLETED
    const reason = event.payload?.reason ?? 'user.interrupt';
    return [{ runId: result.run_id, reason }];
  });
}

/**
 * @internal The local access of a cluster instance, as the cluster's access wraps it: a cancel
 * accepted while its run is live is written on the run's record (`cancelRequest`) in the same
 * batch as the command's effect, so a next holder ends the run CANCELLED, not `owner_lost`; a
 * deleted session's lease is released once the delete answered (its runs have settled, and the
 * purge waits for the lease).
 *
 * @param local - the single-instance access over this instance's runtime
 * @param cluster - this instance
 * @param runs - the holder's run records (a cancel request is written on a recorded run only)
 * @param clock - the runtime's clock (`at` of the cancel request, ms)
 * @param onDeletedReleased - called once a deleted session's lease is released (kick the purge)
 */
export function toHandoffAccess(
  local: SessionAccess,
  cluster: ClusterInstance,
  runs: Pick<RunRecords, 'get'>,
  clock: Clock,
  onDeletedReleased: () => void = () => undefined,
): SessionAccess {
  return {
    ...local,
    execute: (async (command: SessionCommand) => {
      const answer = await local.execute(command);
      const key = { ownerId: command.ownerId, sessionId: command.sessionId };
      if (command.type === 'session.delete') {
        void cluster
          .flushed(key)
          .then(() => cluster.release(key))
          .then(() => unlistSession(cluster.redis, cluster.keyPrefix, key))
          .then(onDeletedReleased, () => undefined);
      }
      for (const { runId, reason } of acceptedCancels(command, answer)) {
        // Only a recorded run (a nested run has no record: a merge would make a partial one).
        if (runs.get(command.ownerId, runId) === undefined) continue;
        cluster.write(key, {
          op: 'run.merge',
          runId,
          fields: { [cancelRequestField]: { reason, at: clock.now() } },
        });
      }
      return answer;
    }) as SessionAccess['execute'],
  };
}
