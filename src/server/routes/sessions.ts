/**
 * Session routes: `POST` and `GET /api/sessions`, `GET`, `PATCH` and `DELETE
 * /api/sessions/:id`.
 *
 * @module
 */
import { Hono } from 'hono';
import { nanoid } from 'nanoid';
import type { SessionKey } from '../../events/event-log.js';
import { findSession } from '../middleware/find-session.js';
import type { idempotency } from '../middleware/idempotency.js';
import { jsonBody } from '../middleware/json-body.js';
import { parseBody, sessionSettingsSchema } from '../schemas.js';
import type { SessionAccess, SessionEventReads } from '../session-access.js';
import { parseSessionListQuery, toSessionCursor } from '../session-list-query.js';
import { refuseNewWorkWhileDraining } from '../session-events.js';
import type { ServiceEnv } from '../service-env.js';

/** What the session routes need. */
export interface SessionRoutesOptions {
  /** How sessions are reached (`session-access.ts`): creates, changes and deletes are commands. */
  readonly access: SessionAccess;
  /** Whether this instance is shutting down (then a new session is refused). */
  readonly isDraining: () => boolean;
  /** The `Idempotency-Key` middleware (see `middleware/idempotency.ts`). */
  readonly idempotent: ReturnType<typeof idempotency>;
}

/** The longest title of a session in the list, in characters (then `…`). */
const maxTitleChars = 80;

/**
 * A session's title in the list: its first message's text, on one line, at most
 * {@link maxTitleChars} characters; `null` before the first message (or once it left the log).
 */
async function titleOf(events: SessionEventReads, key: SessionKey): Promise<string | null> {
  const [first] = await events.read({}, key, { after: 0, limit: 1, types: ['user.message'] });
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
  const { access } = options;
  const app = new Hono<ServiceEnv>();

  app.post(
    '/api/sessions',
    async (_c, next) => {
      refuseNewWorkWhileDraining(options.isDraining());
      await next();
    },
    jsonBody({ emptyAs: {} }),
    options.idempotent,
    async (c) => {
      const settings = parseBody(sessionSettingsSchema, c.get('body'), 'body');
      const created = await access.execute({
        type: 'session.create',
        ownerId: c.get('ownerId'),
        sessionId: nanoid(),
        settings,
      });
      return c.json(created, 201);
    },
  );

  app.get('/api/sessions', async (c) => {
    const { after, limit } = parseSessionListQuery(c.req.queries());
    const ownerId = c.get('ownerId');
    const page = await access.listSessions(ownerId, { after, limit: limit + 1 });
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
            last_seq: await access.events.lastSeq({}, key),
            title: await titleOf(access.events, key),
          };
        }),
      ),
      next_after: page.length > limit && last !== undefined ? toSessionCursor(last) : null,
      has_more: page.length > limit,
    });
  });

  app.get('/api/sessions/:id', findSession(access), async (c) =>
    c.json(await access.viewSession(c.get('session'))),
  );

  app.delete('/api/sessions/:id', findSession(access), async (c) => {
    const { ownerId, sessionId } = c.get('session');
    await access.execute({ type: 'session.delete', ownerId, sessionId });
    return c.body(null, 204);
  });

  app.patch('/api/sessions/:id', findSession(access), jsonBody(), async (c) => {
    const { ownerId, sessionId } = c.get('session');
    const settings = parseBody(sessionSettingsSchema, c.get('body'), 'body');
    return c.json(await access.execute({ type: 'session.update', ownerId, sessionId, settings }));
  });

  return app;
}
