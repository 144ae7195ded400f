/**
 * Idempotency keys: what the service remembers of a request sent with `Idempotency-Key`, so
 * that a retry replays the first answer instead of applying anything twice (the IETF draft
 * "The Idempotency-Key HTTP Header Field"; Stripe's idempotency keys). Implementations: the
 * in-memory {@link createMemoryIdempotencyKeys} here and the SQLite one under `sqlite/`.
 *
 * @module
 */

/** The first answer to a key's request, kept to be replayed. */
export interface StoredAnswer {
  /** The HTTP status (2xx). */
  readonly status: number;
  /** The JSON body, as sent. */
  readonly body: string;
  /** The session the request named or created, if any: deleting it deletes the key. */
  readonly sessionId?: string | undefined;
}

/** What {@link IdempotencyKeys.begin} found for a key. */
export type IdempotencyClaim =
  /** The key was free (or its earlier claim expired): the caller applies the request. */
  | { readonly outcome: 'claimed' }
  /** The key's request was answered: replay this. */
  | { readonly outcome: 'answered'; readonly answer: StoredAnswer }
  /** The key's first request is still being applied (its claim holds until `lockedUntil`). */
  | { readonly outcome: 'in_progress'; readonly lockedUntil: number }
  /** The key was used with another request (method, path or body). */
  | { readonly outcome: 'reused' }
  /** The owner holds `maxKeysPerOwner` live keys already. */
  | { readonly outcome: 'full' };

/** The arguments of {@link IdempotencyKeys.begin}. Times are clock ms. */
export interface BeginIdempotentRequest {
  readonly ownerId: string;
  readonly key: string;
  /** A digest of the request (method, path, JSON-canonical body). */
  readonly fingerprint: string;
  /** Now. */
  readonly at: number;
  /** How long a key is kept after its first request, in ms. */
  readonly ttlMs: number;
  /** How long a claim holds without an answer before it is taken to have died, in ms. */
  readonly lockMs: number;
  /** The most live keys one owner may hold. */
  readonly maxKeysPerOwner: number;
}

/** The idempotency-key store (synchronous, like the other record stores). */
export interface IdempotencyKeys {
  /**
   * Claims `key` for a request, or says what holds it. Expired keys are forgotten first.
   *
   * @throws {@link RunplaneError} (`STORE_FAILED`) when the store fails (SQLite)
   */
  begin(request: BeginIdempotentRequest): IdempotencyClaim;
  /** Keeps the answer of a claimed key, to be replayed until the key expires. */
  complete(ownerId: string, key: string, answer: StoredAnswer): void;
  /** Forgets a claimed key whose request applied nothing (a 4xx) or failed. */
  release(ownerId: string, key: string): void;
  /**
   * Forgets the answered keys of every request about a session (the create that made it
   * included), so that none replays an answer about it once it is deleted.
   */
  forgetSession(ownerId: string, sessionId: string): void;
}

interface Entry {
  readonly fingerprint: string;
  readonly createdAt: number;
  lockedUntil: number;
  answer: StoredAnswer | undefined;
}

/**
 * Creates an in-memory {@link IdempotencyKeys} (the service's default when it is given no
 * store; keys do not outlive the process).
 *
 * @returns the store
 * @example
 * ```ts
 * const service = createServiceApp({ ...options, idempotencyKeys: createMemoryIdempotencyKeys() });
 * ```
 */
export function createMemoryIdempotencyKeys(): IdempotencyKeys {
  const owners = new Map<string, Map<string, Entry>>();
  return {
    begin(request) {
      let keys = owners.get(request.ownerId);
      if (keys === undefined) owners.set(request.ownerId, (keys = new Map<string, Entry>()));
      // Map order is insertion order, that is creation order: expired keys come first.
      for (const [key, entry] of keys) {
        if (entry.createdAt + request.ttlMs > request.at) break;
        keys.delete(key);
      }
      const entry = keys.get(request.key);
      if (entry !== undefined) {
        if (entry.fingerprint !== request.fingerprint) return { outcome: 'reused' };
        if (entry.answer !== undefined) return { outcome: 'answered', answer: entry.answer };
        if (entry.lockedUntil > request.at) {
          return { outcome: 'in_progress', lockedUntil: entry.lockedUntil };
        }
        entry.lockedUntil = request.at + request.lockMs;
        return { outcome: 'claimed' };
      }
      if (keys.size >= request.maxKeysPerOwner) return { outcome: 'full' };
      keys.set(request.key, {
        fingerprint: request.fingerprint,
        createdAt: request.at,
        lockedUntil: request.at + request.lockMs,
        answer: undefined,
      });
      return { outcome: 'claimed' };
    },
    complete(ownerId, key, answer) {
      const entry = owners.get(ownerId)?.get(key);
      if (entry !== undefined) entry.answer ??= answer; // the first answer wins, as in SQLite
    },
    release(ownerId, key) {
      const keys = owners.get(ownerId);
      keys?.delete(key);
      if (keys?.size === 0) owners.delete(ownerId);
    },
    forgetSession(ownerId, sessionId) {
      const keys = owners.get(ownerId);
      for (const [key, entry] of keys ?? []) {
        if (entry.answer?.sessionId === sessionId) keys?.delete(key);
      }
      if (keys?.size === 0) owners.delete(ownerId);
    },
  };
}
