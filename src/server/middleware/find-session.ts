/**
 * The caller's session named by `:id`, as Hono middleware: someone else's session is 404,
 * exactly like one that does not exist.
 *
 * @module
 */
import type { MiddlewareHandler } from 'hono';
import type { SessionRecord } from '../../stores/session-records.js';
import { HttpError } from '../http-error.js';
import type { SessionAccess } from '../session-access.js';

/** The longest session or run id looked up, in characters; a longer one is simply not found. */
export const maxIdLength = 256;

/**
 * Middleware that sets `c.var.session` to the caller's session `:id`.
 *
 * @param access - how sessions are reached (a read: `SessionAccess.findSession`)
 * @returns the middleware
 * @throws {@link HttpError} (`not_found`) when the caller has no session of that id
 */
export function findSession(
  access: Pick<SessionAccess, 'findSession'>,
): MiddlewareHandler<{ Variables: { ownerId: string; session: SessionRecord } }> {
  return async (c, next) => {
    const sessionId = c.req.param('id') ?? '';
    const found =
      sessionId.length <= maxIdLength
        ? await access.findSession(c.get('ownerId'), sessionId)
        : undefined;
    if (found === undefined) {
      throw new HttpError('not_found', `session ${JSON.stringify(sessionId)} was not found`);
    }
    c.set('session', found);
    await next();
  };
}
