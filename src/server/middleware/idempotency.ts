/**
 * `Idempotency-Key` as Hono middleware: a retried `POST` replays its first answer instead of
 * applying anything twice (the IETF draft "The Idempotency-Key HTTP Header Field"; Stripe's
 * idempotency keys).
 *
 * @module
 */
import { createHash } from 'node:crypto';
import type { MiddlewareHandler } from 'hono';
import type { Clock } from '../../clock.js';
import { HttpError } from '../http-error.js';
import type { IdempotencyKeyAccess } from '../session-access.js';

/** Options of {@link idempotency}. */
export interface IdempotencyOptions {
  /** Where keys and first answers are kept (`SessionAccess.idempotencyKeys`). */
  readonly store: IdempotencyKeyAccess;
  /** The clock of key ages (the runtime's). */
  readonly clock: Clock;
  /** How long a key is kept after its first request, in ms. */
  readonly ttlMs: number;
  /**
   * How long a key whose request is being applied by another process (or by one that died)
   * stays claimed, in ms; a retry before then is 409 `idempotency_key_in_progress`.
   */
  readonly lockMs: number;
  /** The most live keys one owner may hold; one more is 429 `too_many_idempotency_keys`. */
  readonly maxKeysPerOwner: number;
}

/** Visible ASCII but `"` and `\`, 1 to 255 characters. */
const keyPattern = /^[\x21\x23-\x5b\x5d-\x7e]{1,255}$/;

/**
 * The key of an `Idempotency-Key` header: a structured-field string (`"..."`, as the draft
 * spells it) or the bare token most clients send.
 */
function parseKey(header: string): string {
  const text = header.trim();
  const key =
    text.length >= 2 && text.startsWith('"') && text.endsWith('"') ? text.slice(1, -1) : text;
  if (!keyPattern.test(key)) {
    throw new HttpError(
      'invalid_idempotency_key',
      'expected the Idempotency-Key header to be 1 to 255 visible ASCII characters (no `"` or `\\` inside)',
    );
  }
  return key;
}

/** JSON with every object's keys sorted: two JSON-equal bodies give one text. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (typeof value === 'object' && value !== null) {
    const record = value as Record<string, unknown>;
    const fields = Object.keys(record)
      .sort()
      .map((name) => `${JSON.stringify(name)}:${canonicalJson(record[name])}`);
    return `{${fields.join(',')}}`;
  }
  return JSON.stringify(value);
}

/**
 * The digest a key is bound to: the request's method, path and JSON-canonical body.
 *
 * @param method - e.g. `POST`
 * @param path - e.g. `/api/sessions/s1/events`
 * @param body - the parsed JSON body
 * @returns a SHA-256 hex digest; JSON-equal bodies give the same one
 */
export function requestFingerprint(method: string, path: string, body: unknown): string {
  return createHash('sha256')
    .update(`${method} ${path}\n${canonicalJson(body)}`)
    .digest('hex');
}

/**
 * Middleware that makes a JSON `POST` idempotent under `Idempotency-Key`; it runs after the
 * body was read (`c.var.body`) and before the handler. Without the header it does nothing.
 *
 * @remarks
 * - A key is the caller's own (`ownerId`) and names one request: its method, path and
 *   JSON-equal body (key order and spacing aside). The first answer that applied something
 *   is kept for `ttlMs` and replayed, with `Idempotent-Replayed: true`, to every retry: a 2xx,
 *   or a 4xx refusing an event after earlier events of the batch were applied (its body's
 *   `results` lists them). An answer that applied nothing, or failed, is not kept, so a retry
 *   applies afresh.
 * - A retry racing the first request in this process waits for it, then replays its answer.
 *   A key claimed by a request that is not in this process (one that died with its process)
 *   is 409 `idempotency_key_in_progress` with `Retry-After` until `lockMs` after its claim,
 *   then it is free again.
 *
 * @param options - {@link IdempotencyOptions}
 * @returns the middleware
 * @throws {@link HttpError} (`invalid_idempotency_key`, 400) for a malformed key;
 *   (`idempotency_key_reused`, 422) for a key used with another request;
 *   (`idempotency_key_in_progress`, 409) as above; (`too_many_idempotency_keys`, 429) past
 *   `maxKeysPerOwner`
 */
export function idempotency(
  options: IdempotencyOptions,
): MiddlewareHandler<{ Variables: { ownerId: string; body: unknown } }> {
  const { store, clock } = options;
  /** The requests of this process that hold a key, by owner and key. */
  const applying = new Map<string, Promise<void>>();
  return async (c, next) => {
    const header = c.req.header('idempotency-key');
    if (header === undefined) return next();
    const key = parseKey(header);
    const ownerId = c.get('ownerId');
    const fingerprint = requestFingerprint(c.req.method, c.req.path, c.get('body'));
    const slot = `${ownerId}\n${key}`;
    // One request of this process holds the slot from before its claim (an await) to its end.
    for (let running = applying.get(slot); running !== undefined; running = applying.get(slot)) {
      await running;
    }
    let settle!: () => void;
    applying.set(slot, new Promise<void>((resolve) => (settle = resolve)));
    try {
      const at = clock.now();
      const claim = await store.begin({
        ownerId,
        key,
        fingerprint,
        at,
        ttlMs: options.ttlMs,
        lockMs: options.lockMs,
        maxKeysPerOwner: options.maxKeysPerOwner,
      });
      switch (claim.outcome) {
        case 'claimed':
          break;
        case 'answered':
          return c.body(claim.answer.body, claim.answer.status as 200, {
            'content-type': 'application/json',
            'idempotent-replayed': 'true',
          });
        case 'reused':
          throw new HttpError(
            'idempotency_key_reused',
            'this Idempotency-Key was used with another request; send a new key for a new request',
          );
        case 'full':
          throw new HttpError(
            'too_many_idempotency_keys',
            `expected at most ${options.maxKeysPerOwner} idempotency keys per owner in ${options.ttlMs / 3_600_000} h; retry later or send none`,
          );
        case 'in_progress':
          c.header('Retry-After', String(Math.max(1, Math.ceil((claim.lockedUntil - at) / 1000))));
          throw new HttpError(
            'idempotency_key_in_progress',
            'a request with this Idempotency-Key is still being applied; retry later',
          );
      }
      await next();
      const { status } = c.res;
      const body = await c.res.clone().text();
      if (appliedSomething(status, c.error === undefined, body)) {
        await store.complete(ownerId, key, {
          status,
          body,
          sessionId: sessionOf(c.req.param('id'), body),
        });
      } else {
        await store.release(ownerId, key);
      }
    } finally {
      applying.delete(slot);
      settle();
    }
  };
}

/** The session a request named (`:id`) or created (the answer's `session_id`), if any. */
function sessionOf(param: string | undefined, body: string): string | undefined {
  if (param !== undefined) return param;
  try {
    const parsed = JSON.parse(body) as { session_id?: unknown };
    return typeof parsed.session_id === 'string' ? parsed.session_id : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Whether an answer applied something: a 2xx, or a 4xx whose body lists the events of its batch
 * that were applied before the refused one (`results`, non-empty).
 */
function appliedSomething(status: number, handled: boolean, body: string): boolean {
  if (status >= 200 && status < 300) return handled;
  if (status < 400 || status >= 500) return false;
  try {
    const parsed = JSON.parse(body) as { results?: unknown };
    return Array.isArray(parsed.results) && parsed.results.length > 0;
  } catch {
    return false;
  }
}
