/**
 * The Redis keys of an owner (docs/architecture.md, "Cluster on Redis"): what is per owner
 * rather than per session (the session list and its quota, the run index, idempotency keys,
 * the request-rate bucket)
 * shares one hash tag per owner, so each of their scripts touches one slot.
 *
 * @module
 * @internal
 */
import { defaultKeyPrefix } from './keys.js';

/** @internal The keys of one owner. All share the hash tag `{o:<len>:<owner>}`. */
export interface OwnerKeys {
  readonly tag: string;
  /**
   * Sorted set, every score 0, member `<createdAt, 16 digits>:<sessionId>`: the owner's live
   * sessions, newest first by `ZREVRANGEBYLEX` (the list's order and cursor).
   */
  readonly sessions: string;
  /** Hash `sessionId → expiresAt` (ms): session slots reserved by a create not yet indexed. */
  readonly reservedSessions: string;
  /** Hash `runId → sessionId`: where each of the owner's runs keeps its record. */
  readonly runs: string;
  /** Hash `key → JSON entry` (fingerprint, claim deadline, session): the owner's idempotency keys. */
  readonly idempotencyKeys: string;
  /** Hash `key → JSON answer`, as the holder encoded it (no script re-encodes it). */
  readonly idempotencyAnswers: string;
  /** Sorted set `key` scored by `createdAt`: the idempotency keys oldest first (expiry). */
  readonly idempotencyAges: string;
  /** Hash `tokens`, `at` (Redis time, ms): the owner's request-rate bucket; expires once full. */
  readonly rateBucket: string;
}

/** @internal The keys of `ownerId` under `prefix`. */
export function toOwnerKeys(ownerId: string, prefix: string = defaultKeyPrefix): OwnerKeys {
  const tag = `{o:${ownerId.length}:${ownerId}}`;
  const base = `${prefix}${tag}`;
  return {
    tag,
    sessions: `${base}:sessions`,
    reservedSessions: `${base}:sessions-reserved`,
    runs: `${base}:runs`,
    idempotencyKeys: `${base}:idempotency`,
    idempotencyAnswers: `${base}:idempotency-answers`,
    idempotencyAges: `${base}:idempotency-ages`,
    rateBucket: `${base}:rate`,
  };
}

/** @internal The key of the cluster's live loop sessions (sorted set, score `createdAt`, member `[owner, session]` JSON). */
export const toLoopSessionsKey = (prefix: string = defaultKeyPrefix): string =>
  `${prefix}loop-sessions`;

/**
 * @internal The key of the cluster's deleted sessions not yet purged (sorted set, score
 * `deletedAt`, member `[owner, session]` JSON; `redis-session-purge.ts`).
 */
export const toDeletedSessionsKey = (prefix: string = defaultKeyPrefix): string =>
  `${prefix}deleted-sessions`;
