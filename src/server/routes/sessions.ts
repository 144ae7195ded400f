/**
 * Session routes: `POST /api/sessions`, `GET` and `PATCH /api/sessions/:id`.
 *
 * @module
 */
import { Hono } from 'hono';
import { nanoid } from 'nanoid';
import type { Runtime } from '../../runtime/create-runtime.js';
import type { SessionRecord, SessionRecords } from '../../stores/session-records.js';
import { HttpError } from '../http-error.js';
import { findSession } from '../middleware/find-session.js';
import type { idempotency } from '../middleware/idempotency.js';
import { jsonBody } from '../middleware/json-body.js';
import { parseBody, sessionSettingsSchema } from '../schemas.js';
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
      strategy: session.strategy,
      grace_ms: session.graceMs,
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
      const created = sessions.create({
        ownerId: c.get('ownerId'),
        sessionId: nanoid(),
        strategy: settings.strategy ?? 'enqueue',
        graceMs: settings.grace_ms ?? defaultGraceMs,
        at: clock.now(),
      });
      if (created === undefined) throw new HttpError('internal', 'a session id collided');
      return c.json(sessionJson(created), 201);
    },
  );

  app.get('/api/sessions/:id', findSession(sessions), (c) => c.json(sessionJson(c.get('session'))));

  app.patch('/api/sessions/:id', findSession(sessions), jsonBody(), (c) => {
    const session = c.get('session');
    const settings = parseBody(sessionSettingsSchema, c.get('body'), 'body');
    if (settings.strategy === undefined && settings.grace_ms === undefined) {
      throw new HttpError('invalid_body', 'expected the body to set `strategy` or `grace_ms`');
    }
    const updated = sessions.update(
      session.ownerId,
      session.sessionId,
      { strategy: settings.strategy, graceMs: settings.grace_ms },
      clock.now(),
    );
    if (updated === undefined) throw new HttpError('not_found', 'the session was not found');
    return c.json(sessionJson(updated));
  });

  return app;
}
