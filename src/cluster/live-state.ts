/**
 * A session's live state in Redis (docs/architecture.md, "Cluster on Redis"): the active run,
 * the queued runs (in the session machine's order) and the waiting approvals, as the holder's
 * runtime knows them, so that any instance can show a session and a run's live status without
 * asking the holder.
 *
 * The holder writes the state as the `live` field of the session's meta hash (its JSON) after
 * every logged event that may change it (`session.run_queued`, `session.run_started`,
 * `run.status`, `agent.approval_requested`, `agent.approval_resolved`), through the session's
 * outbox: in the batch of that event or the next, in order, fenced like every write. The rule
 * that orders the queue stays the session machine's; nobody re-derives it from the log.
 *
 * @module
 * @internal
 */
import type { Redis } from 'ioredis';
import type { RunStatus } from '../../machines/run.machine.js';
import { terminalRunStatuses } from '../../machines/run.types.js';
import { StaleFenceError } from '../errors.js';
import type { SessionKey } from '../events/event-log.js';
import type { Runtime } from '../runtime/create-runtime.js';
import {
  getLiveSessionState,
  idleSessionState,
  type LiveSessionState,
} from '../server/session-view.js';
import type { RunRecord } from '../stores/run-records.js';
import type { ClusterInstance } from './cluster-instance.js';
import type { SessionKeys } from './keys.js';
import { recordStoreFailed } from './redis-run-records.js';

/** The meta hash field that holds the live state. */
const liveField = 'live';

/** The logged events after which a session's live state may differ. */
const changing = new Set([
  'session.run_queued',
  'session.run_started',
  'run.status',
  'agent.approval_requested',
  'agent.approval_resolved',
]);

/** @internal What the holder reads its sessions' live state from. */
export type LiveStateSource = Pick<Runtime, 'onEvent' | 'session' | 'pendingApprovals'>;

/**
 * @internal Queues the session's live state, as `runtime` has it now, in its outbox.
 *
 * @throws {@link StaleFenceError} (`STALE_FENCE`) when the session is not held here
 */
export function writeLiveState(
  cluster: ClusterInstance,
  runtime: LiveStateSource,
  key: SessionKey,
): void {
  const json = JSON.stringify(getLiveSessionState(runtime, key));
  cluster.write(key, { op: 'meta.set', fields: { [liveField]: json } });
}

/**
 * @internal Keeps the live state of every session held here in Redis, from the runtime's
 * events (called in log order, after the step that logged them).
 *
 * @returns a function that stops it
 */
export function publishLiveState(
  cluster: ClusterInstance,
  runtime: LiveStateSource,
  reportError: (error: unknown) => void,
): () => void {
  return runtime.onEvent((event, key) => {
    if (!changing.has(event.type) || cluster.fenceOf(key) === undefined) return;
    try {
      writeLiveState(cluster, runtime, key);
    } catch (error) {
      if (!(error instanceof StaleFenceError)) reportError(error); // lost meanwhile: not ours
    }
  });
}

const isLiveState = (value: unknown): value is LiveSessionState => {
  const state = value as Partial<LiveSessionState> | null;
  return (
    typeof state === 'object' &&
    state !== null &&
    (state.active_run_id === null || typeof state.active_run_id === 'string') &&
    Array.isArray(state.queued_run_ids) &&
    Array.isArray(state.pending_approvals)
  );
};

/**
 * @internal Reads a session's live state and its durable last `seq` in one round trip; a
 * session whose holder never wrote one is idle.
 *
 * @throws `RunplaneError` (`STORE_FAILED`) for a stored state that is not one
 */
export async function readLiveState(
  redis: Redis,
  keys: SessionKeys,
): Promise<{ readonly live: LiveSessionState; readonly lastSeq: number }> {
  const replies = (await redis.pipeline().hget(keys.meta, liveField).get(keys.seq).exec()) ?? [];
  const [[liveError, json] = [null, null], [seqError, seq] = [null, null]] = replies as Array<
    [Error | null, string | null]
  >;
  const error = liveError ?? seqError;
  if (error !== null) throw recordStoreFailed('live state read', error.message, error);
  if (json === null) return { live: idleSessionState, lastSeq: Number(seq ?? 0) };
  let live: unknown;
  try {
    live = JSON.parse(json);
  } catch (cause) {
    throw recordStoreFailed('live state read', 'the live state is not JSON', cause);
  }
  if (!isLiveState(live)) throw recordStoreFailed('live state read', 'not a live state');
  return { live, lastSeq: Number(seq ?? 0) };
}

/**
 * @internal A run's status as its holder knows it: a terminal status is the record's; else
 * `RUNNING` for the active run, `QUEUED` for a queued one, and `QUEUED` for an unfinished run
 * the live state does not name (a drained instance handed it on, unstarted, and its next holder
 * has not written the live state yet; the record itself stays `CREATED` until the run ends).
 */
export function toLiveRunStatus(record: RunRecord, live: LiveSessionState): RunStatus {
  if (terminalRunStatuses.has(record.status)) return record.status;
  if (live.active_run_id === record.runId) return 'RUNNING';
  if (live.queued_run_ids.includes(record.runId)) return 'QUEUED';
  return record.status === 'CREATED' ? 'QUEUED' : record.status;
}
