/**
 * Event routes: `POST /api/sessions/:id/events` (a batch of user events, the command
 * `session.apply_events`, applied by `applySessionEvents` on the session's holder) and
 * `GET /api/sessions/:id/events` (a page of the log).
 *
 * @module
 */
import { Hono } from 'hono';
import { findSession } from '../middleware/find-session.js';
import type { idempotency } from '../middleware/idempotency.js';
import { jsonBody } from '../middleware/json-body.js';
import { parseEventBatch, parseEventQuery } from '../schemas.js';
import type { SessionAccess } from '../session-access.js';
import type { ServiceEnv } from '../service-env.js';
import { toEventJson } from '../sse.js';
import { eventQueryOf } from './event-query.js';

/** What the event routes need. */
export interface EventRoutesOptions {
  /** How sessions are reached (`session-access.ts`): a batch is a command, a page a read. */
  readonly access: SessionAccess;
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
  const { access } = options;
  const eventLog = access.events;
  const app = new Hono<ServiceEnv>();

  app.post(
    '/api/sessions/:id/events',
    findSession(access),
    jsonBody(),
    options.idempotent,
    // The session may have been deleted (or its settings changed) while the body was on its
    // way: the command looks it up again where it is applied, in the step that applies the
    // events, so a deleted session never gets a new run (404 `not_found`). Not again here: in
    // a cluster that would be one more round trip to Redis before every message and cancel.
    async (c) => {
      const events = parseEventBatch(c.get('body'));
      const { ownerId, sessionId } = c.get('session');
      return c.json(
        await access.execute({ type: 'session.apply_events', ownerId, sessionId, events }),
      );
    },
  );

  app.get('/api/sessions/:id/events', findSession(access), async (c) => {
    const session = c.get('session');
    const query = parseEventQuery(eventQueryOf(c), true);
    const key = { ownerId: session.ownerId, sessionId: session.sessionId };
    const lastSeq = await eventLog.lastSeq({}, key);
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
