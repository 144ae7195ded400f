/**
 * Event routes: `POST /api/sessions/:id/events` (a batch of user events, applied by
 * {@link applySessionEvents}) and `GET /api/sessions/:id/events` (a page of the log).
 *
 * @module
 */
import { Hono } from 'hono';
import type { SessionRecords } from '../../stores/session-records.js';
import { findSession } from '../middleware/find-session.js';
import type { idempotency } from '../middleware/idempotency.js';
import { jsonBody } from '../middleware/json-body.js';
import { parseEventBatch, parseEventQuery } from '../schemas.js';
import { applySessionEvents, type SessionEventsContext } from '../session-events.js';
import type { ServiceEnv } from '../service-env.js';
import { toEventJson } from '../sse.js';
import { eventQueryOf } from './event-query.js';

/** What the event routes need: the session-event rules' context and the sessions. */
export interface EventRoutesOptions extends SessionEventsContext {
  /** Where sessions are kept. */
  readonly sessions: SessionRecords;
  /** The `Idempotency-Key` middleware (see `middleware/idempotency.ts`). */
  readonly idempotent: ReturnType<typeof idempotency>;
}

/**
 * The event routes, to mount with `app.route('/', ...)` behind the `/api` middleware.
 *
 * @param options - {@link EventRoutesOptions}
 * @returns the routes as a Hono app
 */
export function eventRoutes(options: EventRoutesOptions): Hono<ServiceEnv> {
  const eventLog = options.runtime.eventLog;
  const app = new Hono<ServiceEnv>();

  app.post(
    '/api/sessions/:id/events',
    findSession(options.sessions),
    jsonBody(),
    options.idempotent,
    // Again, once the body is in: the session may have been deleted (or its settings changed)
    // while the body was on its way, and a deleted session must never get a new run.
    findSession(options.sessions),
    (c) => {
      const events = parseEventBatch(c.get('body'));
      return c.json({ results: applySessionEvents(options, c.get('session'), events) });
    },
  );

  app.get('/api/sessions/:id/events', findSession(options.sessions), async (c) => {
    const session = c.get('session');
    const query = parseEventQuery(eventQueryOf(c), true);
    const key = { ownerId: session.ownerId, sessionId: session.sessionId };
    const lastSeq = eventLog.lastSeq({}, key);
    const read = await eventLog.read({}, key, {
      after: query.after,
      limit: query.limit + 1,
      types: query.types,
    });
    const page = read.slice(0, query.limit);
    return c.json({
      events: page.map(toEventJson),
      // Never past the end: a client that follows it must not skip events yet to come.
      next_after: page.at(-1)?.seq ?? Math.min(query.after, lastSeq),
      has_more: read.length > query.limit,
      last_seq: lastSeq,
    });
  });

  return app;
}
