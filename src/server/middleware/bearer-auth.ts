/**
 * Bearer authentication as Hono middleware: the token names the owner (`ownerId`), which is
 * never taken from a request body (README "HTTP API").
 *
 * @module
 */
import type { MiddlewareHandler } from 'hono';
import { bearerToken, type Authenticate } from '../auth.js';
import { HttpError } from '../http-error.js';

/**
 * Middleware that sets `ownerId` from `Authorization: Bearer <token>`, or refuses with 401.
 *
 * @remarks An SSE stream path (ending in `/events/stream`) may carry the token as
 * `?access_token=` instead, because `EventSource` cannot send headers; only when no
 * `Authorization` header is sent at all. A 401 carries `WWW-Authenticate: Bearer`.
 *
 * @param authenticate - maps a token to its owner
 * @returns the middleware
 * @throws {@link HttpError} (`unauthorized`) for a missing or unknown token
 * @example
 * ```ts
 * app.use('/api/*', bearerAuth(createTokenAuthenticator(new Map([['s3cret-alice', 'alice']]))));
 * ```
 */
export function bearerAuth(
  authenticate: Authenticate,
): MiddlewareHandler<{ Variables: { ownerId: string } }> {
  return async (c, next) => {
    const header = c.req.header('authorization');
    let token = bearerToken(header);
    if (token === undefined && header === undefined && c.req.path.endsWith('/events/stream')) {
      token = c.req.query('access_token');
    }
    const ownerId = token === undefined ? undefined : authenticate(token);
    if (ownerId === undefined) {
      c.header('WWW-Authenticate', 'Bearer realm="runplane"');
      throw new HttpError(
        'unauthorized',
        header === undefined && token === undefined
          ? 'expected an Authorization: Bearer <token> header'
          : 'the token is not valid',
      );
    }
    c.set('ownerId', ownerId);
    await next();
  };
}
