/**
 * Session routes: `POST` and `GET /api/sessions`, `GET`, `PATCH` and `DELETE
 * /api/sessions/:id`.
 *
 * @module
 */
import { Hono } from 'hono';
import { nanoid } from 'nanoid';
import type { EventLog, SessionKey } from '../../events/event-log.js';
import type { Runtime } from '../../runtime/create-runtime.js';
import type { IdempotencyKeys } from '../../stores/idempotency-keys.js';
import type { SessionRecord, SessionRecords } from '../../stores/session-records.js';
import { HttpError } from '../http-error.js';
import type { LoopSessions } from '../loop-sessions.js';
import { findSession } from '../middleware/find-session.js';
import type { idempotency } from '../middleware/idempotency.js';
import { jsonBody } from '../middleware/json-body.js';
import { parseBody, sessionSettingsSchema } from '../schemas.js';
import { parseSessionListQuery, toSessionCursor } from '../session-list-query.js';
import { refuseNewWorkWhileDraining } from '../session-events.js';
import type { ServiceEnv } from '../service-env.js';

/** What the session routes need. */
export interface SessionRoutesOptions {
  readonly runtime: Runtime;
  /** Where sessions (owner, strategy, grace) are kept. */
  readonly sessions: SessionRecords;
  /** `grace_ms` of a new session that names none, in ms. */
  readonly defaultGraceMs: number;
  /** Whether the service is shutting down (then a new session is refused). */
  readonly isDraining: () => boolean;
  /** The `Idempotency-Key` middleware (see `middleware/idempotency.ts`). */
  readonly idempotent: ReturnType<typeof idempotency>;
  /** The keys it keeps (a deleted session's are forgotten at once). */
  readonly idempotencyKeys: IdempotencyKeys;
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

/**
 * Refuses settings that do not apply: `strategy` for a loop session (the loop is the strategy),
 * `mode` on a change (fixed at creation).
 */
function refuseSettingsOfOtherMode(
  settings: { mode?: string | undefined; strategy?: string | undefined },
  mode: string,
  change: boolean,
): void {
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
}

/** The longest title of a session in the list, in characters (then `…`). */
const maxTitleChars = 80;

/**
 * A session's title in the list: its first message's text, on one line, at most
 * {@link maxTitleChars} characters; `null` before the first message (or once it left the log).
 */
async function titleOf(eventLog: EventLog, key: SessionKey): Promise<string | null> {
  const [first] = await eventLog.read({}, key, { after: 0, limit: 1, types: ['user.message'] });
  const text = first?.payload?.text;
  if (typeof text !== 'string') return null;
  const line = text.replace(/\s+/g, ' ').trim();
  const chars = Array.from(line);
  return chars.length <= maxTitleChars ? line : `${chars.slice(0, maxTitleChars - 1).join('')}…`;
}

/**
 * The session routes, to mount with `app.route('/', ...)` behind the `/api` middleware.
 *
 * @param options - {@link SessionRoutesOptions}
 * @returns the routes as a Hono app
 */
export function sessionRoutes(options: SessionRoutesOptions): Hono<ServiceEnv> {
  const { runtime, sessions, defaultGraceMs } = options;
  const clock = runtime.clock;
  const app = new Hono<ServiceEnv>();

  const sessionJson = (session: SessionRecord) => {
    const handle = runtime.session(session.ownerId, session.sessionId);
    const activeRunId = handle.activeRunId ?? null;
    const queued = handle.queuedRunIds;
    const key = { ownerId: session.ownerId, sessionId: session.sessionId };
    return {
      session_id: session.sessionId,
      mode: session.mode,
      // A loop session has no busy-session strategy: its TurnLoop decides.
      strategy: session.mode === 'loop' ? null : session.strategy,
      grace_ms: session.graceMs,
      approval_timeout_ms: session.approvalTimeoutMs ?? options.defaultApprovalTimeoutMs,
      status: activeRunId !== null ? 'running' : queued.length > 0 ? 'queued' : 'idle',
      active_run_id: activeRunId,
      queued_run_ids: queued,
      pending_approvals: runtime
        .pendingApprovals(session.ownerId, session.sessionId)
        .map((p) => ({ tool_use_id: p.toolUseId, name: p.name, args: p.args, run_id: p.runId })),
      last_seq: runtime.eventLog.lastSeq({}, key),
      created_at: session.createdAt,
      updated_at: session.updatedAt,
    };
  };

  app.post(
    '/api/sessions',
    async (_c, next) => {
      refuseNewWorkWhileDraining(options.isDraining());
      await next();
    },
    jsonBody({ emptyAs: {} }),
    options.idempotent,
    (c) => {
      const settings = parseBody(sessionSettingsSchema, c.get('body'), 'body');
      const mode = settings.mode ?? 'runs';
      refuseSettingsOfOtherMode(settings, mode, false);
      const ownerId = c.get('ownerId');
      if (sessions.count(ownerId) >= options.maxSessionsPerOwner) {
        throw new HttpError(
          'too_many_sessions',
          `expected at most ${options.maxSessionsPerOwner} sessions per owner; delete one first`,
        );
      }
      const created = sessions.create({
        ownerId,
        sessionId: nanoid(),
        strategy: settings.strategy ?? 'enqueue',
        graceMs: settings.grace_ms ?? defaultGraceMs,
        approvalTimeoutMs: settings.approval_timeout_ms,
        mode,
        at: clock.now(),
      });
      if (created === undefined) throw new HttpError('internal', 'a session id collided');
      return c.json(sessionJson(created), 201);
    },
  );

  app.get('/api/sessions', async (c) => {
    const { after, limit } = parseSessionListQuery(c.req.queries());
    const ownerId = c.get('ownerId');
    const page = sessions.list(ownerId, { after, limit: limit + 1 });
    const shown = page.slice(0, limit);
    const last = shown.at(-1);
    return c.json({
      sessions: await Promise.all(
        shown.map(async (session) => {
          const key = { ownerId, sessionId: session.sessionId };
          return {
            session_id: session.sessionId,
            mode: session.mode,
            created_at: session.createdAt,
            updated_at: session.updatedAt,
            last_seq: runtime.eventLog.lastSeq({}, key),
            title: await titleOf(runtime.eventLog, key),
          };
        }),
      ),
      next_after: page.length > limit && last !== undefined ? toSessionCursor(last) : null,
      has_more: page.length > limit,
    });
  });

  app.get('/api/sessions/:id', findSession(sessions), (c) => c.json(sessionJson(c.get('session'))));

  app.delete('/api/sessions/:id', findSession(sessions), async (c) => {
    const { ownerId, sessionId } = c.get('session');
    // The mark first: from here on every request for the session is 404, so no run can join.
    if (!sessions.markDeleted(ownerId, sessionId, clock.now())) {
      throw new HttpError('not_found', `session ${JSON.stringify(sessionId)} was not found`);
    }
    // At once, not with the purge: a create retried with its key now makes a new session.
    options.idempotencyKeys.forgetSession(ownerId, sessionId);
    const key = { ownerId, sessionId };
    const settlingKey = JSON.stringify([ownerId, sessionId]);
    options.settling.add(settlingKey);
    try {
      // A loop first: stopped at once, no checkpoint kept; then whatever run is left.
      if (c.get('session').mode === 'loop') await options.loopSessions.remove(key);
      const handle = runtime.session(ownerId, sessionId);
      handle.cancelAll({ includeActive: true });
      // Bounded by the runtime's unwindTimeoutMs: an agent that ignores its signal is abandoned.
      await handle.onIdle();
    } finally {
      options.settling.delete(settlingKey);
    }
    options.onSessionDeleted(key);
    return c.body(null, 204);
  });

  app.patch('/api/sessions/:id', findSession(sessions), jsonBody(), (c) => {
    const session = c.get('session');
    const settings = parseBody(sessionSettingsSchema, c.get('body'), 'body');
    refuseSettingsOfOtherMode(settings, session.mode, true);
    if (
      settings.strategy === undefined &&
      settings.grace_ms === undefined &&
      settings.approval_timeout_ms === undefined
    ) {
      throw new HttpError(
        'invalid_body',
        'expected the body to set `strategy`, `grace_ms` or `approval_timeout_ms`',
      );
    }
    const updated = sessions.update(
      session.ownerId,
      session.sessionId,
      {
        strategy: settings.strategy,
        graceMs: settings.grace_ms,
        approvalTimeoutMs: settings.approval_timeout_ms,
      },
      clock.now(),
    );
    if (updated === undefined) throw new HttpError('not_found', 'the session was not found');
    return c.json(sessionJson(updated));
  });

  return app;
}
