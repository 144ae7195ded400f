/**
 * The query of `GET /api/sessions` (`after`, `limit`), read strictly, and its cursor: the
 * last session of a page, as `<created_at>.<session_id>` (opaque to clients).
 *
 * @module
 */
import type { SessionCursor, SessionRecord } from '../stores/session-records.js';
import { HttpError } from './http-error.js';

/** The page size of `GET /api/sessions` when the query names none. */
const defaultLimit = 20;
/** The largest page of `GET /api/sessions`. */
const maxLimit = 100;

const cursorPattern = /^(0|[1-9]\d{0,15})\.(.{1,256})$/s;

/** The cursor that resumes a listing after `session`. */
export function toSessionCursor(session: SessionRecord): string {
  return `${session.createdAt}.${session.sessionId}`;
}

/**
 * Parses the query of `GET /api/sessions`.
 *
 * @param queries - every query parameter with all its values (`c.req.queries()`)
 * @returns `after` (the cursor a previous page gave as `next_after`, or `undefined` for the
 *   newest), `limit` (1–100, default 20)
 * @throws {@link HttpError} (`invalid_query`, 400) for a malformed or repeated parameter, or an
 *   unknown one
 */
export function parseSessionListQuery(queries: Record<string, string[]>): {
  after: SessionCursor | undefined;
  limit: number;
} {
  for (const [name, values] of Object.entries(queries)) {
    if (name !== 'after' && name !== 'limit') {
      throw new HttpError(
        'invalid_query',
        `expected only \`after\` and \`limit\`, got \`${name.slice(0, 40)}\``,
      );
    }
    if (values.length > 1) {
      throw new HttpError('invalid_query', `expected \`${name}\` at most once in the query`);
    }
  }
  const afterText = queries.after?.[0];
  const limitText = queries.limit?.[0];
  let after: SessionCursor | undefined;
  if (afterText !== undefined) {
    const match = cursorPattern.exec(afterText);
    const createdAt = Number(match?.[1]);
    if (match?.[2] === undefined || !Number.isSafeInteger(createdAt)) {
      throw new HttpError(
        'invalid_query',
        'expected `after` to be the `next_after` of a previous page',
      );
    }
    after = { createdAt, sessionId: match[2] };
  }
  let limit = defaultLimit;
  if (limitText !== undefined) {
    limit = /^[1-9]\d{0,2}$/.test(limitText) ? Number(limitText) : 0;
    if (limit < 1 || limit > maxLimit) {
      throw new HttpError(
        'invalid_query',
        `expected \`limit\` to be an integer from 1 to ${maxLimit}, got ${JSON.stringify(limitText.slice(0, 40))}`,
      );
    }
  }
  return { after, limit };
}
