/**
 * The rules of a session's own commands, free of HTTP: creating a session, changing its
 * settings, deleting it, and how a session is shown (README "HTTP API"; docs/architecture.md,
 * "Data lifecycle"). The single-instance session access (`local-session-access.ts`)
 * applies them; a refusal is an {@link HttpError} the routes answer with.
 *
 * @module
 */
import type { Runtime } from '../runtime/create-runtime.js';
import type { SessionRecord, SessionRecords } from '../stores/session-records.js';
import { HttpError } from './http-error.js';
import type { LoopSessions } from './loop-sessions.js';
import type {
  IdempotencyKeyAccess,
  SessionCommand,
  SessionSettings,
  SessionView,
} from './session-access.js';
import { getLiveSessionState, toSessionView } from './session-view.js';

/** What the session commands need: the runtime, the stores and the service's settings. */
export interface SessionCommandsContext {
  readonly runtime: Runtime;
  /** Where sessions (owner, strategy, grace) are kept. */
  readonly sessions: SessionRecords;
  /** The `Idempotency-Key` store: a deleted session's keys are forgotten at once. */
  readonly idempotencyKeys: IdempotencyKeyAccess;
  /** `grace_ms` of a new session that names none, in ms. */
  readonly defaultGraceMs: number;
  /** Sessions one owner may have; one more is 429 `too_many_sessions`. */
  readonly maxSessionsPerOwner: number;
  /** The approval timeout of a session that sets none, in ms. */
  readonly defaultApprovalTimeoutMs: number;
  /**
   * Called once a deleted session has no run left (its runs were cancelled and settled): its
   * data can go (`data-sweeper.ts`).
   */
  readonly onSessionDeleted: (key: { ownerId: string; sessionId: string }) => void;
  /** Marks a session whose runs are settling after its deletion (the sweep leaves it alone). */
  readonly settling: Set<string>;
  /** The loop sessions' TurnLoops: a deleted loop session's loop stops, its checkpoint goes. */
  readonly loopSessions: LoopSessions;
}

type CommandOf<TType extends SessionCommand['type']> = Extract<SessionCommand, { type: TType }>;

/**
 * Refuses settings that do not apply: `strategy` for a loop session (the loop is the strategy),
 * `mode` on a change (fixed at creation).
 */
function refuseSettingsOfOtherMode(settings: SessionSettings, mode: string, change: boolean): void {
  if (change && settings.mode !== undefined) {
    throw new HttpError(
      'invalid_body',
      `expected \`mode\` to be absent (it is fixed when the session is created), got ${JSON.stringify(settings.mode)}`,
    );
  }
  if (mode === 'loop' && settings.strategy !== undefined) {
    throw new HttpError(
      'invalid_body',
      `expected \`strategy\` to be absent for a loop session (its TurnLoop decides; a message preempts with \`preempt: true\`), got ${JSON.stringify(settings.strategy)}`,
    );
  }
  if (mode === 'loop' && settings.failover !== undefined) {
    throw new HttpError(
      'invalid_body',
      `expected \`failover\` to be absent for a loop session (its loop always resumes from its checkpoint), got ${JSON.stringify(settings.failover)}`,
    );
  }
}

const notFound = (sessionId: string) =>
  new HttpError('not_found', `session ${JSON.stringify(sessionId)} was not found`);

/**
 * A session as the API shows it, with its live status from the runtime.
 *
 * @param context - {@link SessionCommandsContext}
 * @param session - the session's record
 * @returns its {@link SessionView}
 */
export function viewSession(context: SessionCommandsContext, session: SessionRecord): SessionView {
  const key = { ownerId: session.ownerId, sessionId: session.sessionId };
  return toSessionView(
    session,
    getLiveSessionState(context.runtime, key),
    context.runtime.eventLog.lastSeq({}, key),
    context.defaultApprovalTimeoutMs,
  );
}

/**
 * `session.create`: a new session of the owner, within its cap.
 *
 * @throws {@link HttpError} (`invalid_body`) for a `strategy` of a loop session;
 *   (`too_many_sessions`) past `maxSessionsPerOwner`; (`internal`) when the id is taken
 */
export function createSession(
  context: SessionCommandsContext,
  command: CommandOf<'session.create'>,
): SessionView {
  const { settings, ownerId } = command;
  const mode = settings.mode ?? 'runs';
  refuseSettingsOfOtherMode(settings, mode, false);
  if (context.sessions.count(ownerId) >= context.maxSessionsPerOwner) {
    throw new HttpError(
      'too_many_sessions',
      `expected at most ${context.maxSessionsPerOwner} sessions per owner; delete one first`,
    );
  }
  const created = context.sessions.create({
    ownerId,
    sessionId: command.sessionId,
    strategy: settings.strategy ?? 'enqueue',
    graceMs: settings.grace_ms ?? context.defaultGraceMs,
    approvalTimeoutMs: settings.approval_timeout_ms,
    failover: settings.failover,
    mode,
    at: context.runtime.clock.now(),
  });
  if (created === undefined) throw new HttpError('internal', 'a session id collided');
  return viewSession(context, created);
}

/**
 * `session.update`: changes a session's strategy, grace, approval timeout or failover policy.
 *
 * @throws {@link HttpError} (`not_found`) for a session that is gone; (`invalid_body`) for a
 *   `mode`, a loop session's `strategy`, or a change of nothing
 */
export function updateSession(
  context: SessionCommandsContext,
  command: CommandOf<'session.update'>,
): SessionView {
  const { sessions, runtime } = context;
  const { settings, ownerId, sessionId } = command;
  const session = sessions.get(ownerId, sessionId);
  if (session === undefined) throw notFound(sessionId);
  refuseSettingsOfOtherMode(settings, session.mode, true);
  if (
    settings.strategy === undefined &&
    settings.grace_ms === undefined &&
    settings.approval_timeout_ms === undefined &&
    settings.failover === undefined
  ) {
    throw new HttpError(
      'invalid_body',
      'expected the body to set `strategy`, `grace_ms`, `approval_timeout_ms` or `failover`',
    );
  }
  const updated = sessions.update(
    ownerId,
    sessionId,
    {
      strategy: settings.strategy,
      graceMs: settings.grace_ms,
      approvalTimeoutMs: settings.approval_timeout_ms,
      failover: settings.failover,
    },
    runtime.clock.now(),
  );
  if (updated === undefined) throw new HttpError('not_found', 'the session was not found');
  return viewSession(context, updated);
}

/**
 * `session.delete`: marks the session deleted (from then on every request for it is 404, so no
 * run can join), forgets its idempotency keys, stops its loop, cancels its runs and waits for
 * them to settle (bounded by the runtime's `unwindTimeoutMs`), then calls `onSessionDeleted`.
 *
 * @throws {@link HttpError} (`not_found`) for a session that is gone
 */
export async function deleteSession(
  context: SessionCommandsContext,
  command: CommandOf<'session.delete'>,
): Promise<null> {
  const { sessions, runtime } = context;
  const { ownerId, sessionId } = command;
  const session = sessions.get(ownerId, sessionId);
  // The mark first: from here on every request for the session is 404, so no run can join.
  if (session === undefined || !sessions.markDeleted(ownerId, sessionId, runtime.clock.now())) {
    throw notFound(sessionId);
  }
  // At once, not with the purge: a create retried with its key now makes a new session.
  await context.idempotencyKeys.forgetSession(ownerId, sessionId);
  const key = { ownerId, sessionId };
  const settlingKey = JSON.stringify([ownerId, sessionId]);
  context.settling.add(settlingKey);
  try {
    // A loop first: stopped at once, no checkpoint kept; then whatever run is left.
    if (session.mode === 'loop') await context.loopSessions.remove(key);
    const handle = runtime.session(ownerId, sessionId);
    handle.cancelAll({ includeActive: true });
    // Bounded by the runtime's unwindTimeoutMs: an agent that ignores its signal is abandoned.
    await handle.onIdle();
  } finally {
    context.settling.delete(settlingKey);
  }
  context.onSessionDeleted(key);
  return null;
}
