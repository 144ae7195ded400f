/**
 * How a session is shown (`GET /api/sessions/:id`, README "HTTP API"): its record, its live
 * state (active run, queued runs, waiting approvals) and its last `seq`. One shape whatever
 * answers: the runtime that drives the session, or, in a cluster, what its holder last wrote
 * to Redis (docs/architecture.md, "Cluster on Redis").
 *
 * @module
 */
import type { SessionKey } from '../events/event-log.js';
import type { Runtime } from '../runtime/create-runtime.js';
import type { SessionRecord } from '../stores/session-records.js';
import type { SessionView } from './session-access.js';

/** The part of a {@link SessionView} that only the session's driver knows. */
export type LiveSessionState = Pick<
  SessionView,
  'active_run_id' | 'queued_run_ids' | 'pending_approvals'
>;

/** The live state of a session that no run has touched (or that nobody drives). */
export const idleSessionState: LiveSessionState = {
  active_run_id: null,
  queued_run_ids: [],
  pending_approvals: [],
};

/**
 * The live state of a session as `runtime` drives it now.
 *
 * @param runtime - the runtime (its session handles and approvals)
 * @param key - the session
 * @returns its {@link LiveSessionState}
 */
export function getLiveSessionState(
  runtime: Pick<Runtime, 'session' | 'pendingApprovals'>,
  key: SessionKey,
): LiveSessionState {
  const handle = runtime.session(key.ownerId, key.sessionId);
  return {
    active_run_id: handle.activeRunId ?? null,
    queued_run_ids: [...handle.queuedRunIds],
    pending_approvals: runtime
      .pendingApprovals(key.ownerId, key.sessionId)
      .map((p) => ({ tool_use_id: p.toolUseId, name: p.name, args: p.args, run_id: p.runId })),
  };
}

/**
 * A session as the API shows it.
 *
 * @param session - the session's record
 * @param live - its live state
 * @param lastSeq - its log's last `seq` (0 when empty)
 * @param defaultApprovalTimeoutMs - the approval timeout of a session that sets none, in ms
 * @returns its {@link SessionView}
 */
export function toSessionView(
  session: SessionRecord,
  live: LiveSessionState,
  lastSeq: number,
  defaultApprovalTimeoutMs: number,
): SessionView {
  const activeRunId = live.active_run_id;
  const queued = live.queued_run_ids;
  return {
    session_id: session.sessionId,
    mode: session.mode,
    // A loop session has no busy-session strategy: its TurnLoop decides.
    strategy: session.mode === 'loop' ? null : session.strategy,
    grace_ms: session.graceMs,
    approval_timeout_ms: session.approvalTimeoutMs ?? defaultApprovalTimeoutMs,
    failover: session.failover,
    status: activeRunId !== null ? 'running' : queued.length > 0 ? 'queued' : 'idle',
    active_run_id: activeRunId,
    queued_run_ids: queued,
    pending_approvals: live.pending_approvals,
    last_seq: lastSeq,
    created_at: session.createdAt,
    updated_at: session.updatedAt,
  };
}
