/**
 * The query of the event routes (`after`, `limit`, `types`), read strictly.
 *
 * @module
 */
import type { Context } from 'hono';
import { HttpError } from '../http-error.js';

/**
 * The query parameters, refusing a repeated `after`, `limit` or `types` (never a silent pick).
 *
 * @param c - the request's context
 * @returns every query parameter, each once
 * @throws {@link HttpError} (`invalid_query`) for a repeated `after`, `limit` or `types`
 */
export function eventQueryOf(c: Context): Record<string, string | undefined> {
  const all = c.req.queries();
  for (const name of ['after', 'limit', 'types']) {
    if ((all[name]?.length ?? 0) > 1) {
      throw new HttpError('invalid_query', `expected \`${name}\` at most once in the query`);
    }
  }
  return c.req.query();
}
