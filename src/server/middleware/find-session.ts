/**
 * The caller's session named by `:id`, as Hono middleware: someone else's session is 404,
 * exactly like one that does not exist.
 *
 * @module
 */
import type { MiddlewareHandler } from 'hono';
import type { SessionRecord, SessionRecords } from '../../stores/session-records.js';
import { HttpError } from '../http-error.js';

/** The longest session or run id looked up, in characters; a longer one is simply not found. */
export const maxIdLength = 256;

/**
 * Middleware that sets `c.var.session` to the caller's session `:id`.
 *
 * @param sessions - where sessions are kept
 * @returns the middleware
 * @throws {@link HttpError} (`not_found`) when the caller has no session of that id
 */
export function findSession(
  sessions: SessionRecords,
): MiddlewareHandler<{ Variables: { ownerId: string; session: SessionRecord } }> {
  return async (c, next) => {
    const sessionId = c.req.param('id') ?? '';
    const found =
      sessionId.length <= maxIdLength ? sessions.get(c.get('ownerId'), sessionId) : undefined;
    if (found === undefined) {
      throw new HttpError('not_found', `session ${JSON.stringify(sessionId)} was not found`);
    }
    c.set('session', found);
    await next();
  };
}
