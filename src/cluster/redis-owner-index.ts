/**
 * The owner's session index and its cluster-wide session quota on Redis (docs/architecture.md,
 * "Cluster on Redis"). The index lives in the owner's hash tag, a slot apart from the sessions
 * it lists, so it is written by its own small scripts, never in a session's batch:
 *
 * - a create first **reserves** a slot (`reserveSession`: one script counts the indexed
 *   sessions and the live reservations against the quota and reserves, atomically, so two
 *   instances creating at once never pass the quota together);
 * - once the holder's batch carrying the session's record is acknowledged, `indexSession`
 *   adds it to the index and drops the reservation; `unindexSession` removes it after a delete;
 * - both are idempotent, run again whenever a lease is taken (repair), and a list drops (and
 *   removes) an index entry whose session record is gone or deleted. A reservation that no
 *   create followed expires after its hold.
 *
 * @module
 * @internal
 */
import type { Redis } from 'ioredis';
import { InvalidArgumentError } from '../errors.js';
import { toOwnerKeys, type OwnerKeys } from './owner-keys.js';

/**
 * KEYS: sessions, reserved. ARGV: sessionId, max, at, expiresAt. Drops expired reservations,
 * then reserves when the indexed and reserved sessions are under `max`.
 * Returns 1 (reserved), 0 (full).
 */
const reserveLua = `
local reserved = redis.call('HGETALL', KEYS[2])
local now = tonumber(ARGV[3])
for i = 1, #reserved, 2 do
  if tonumber(reserved[i + 1]) <= now then redis.call('HDEL', KEYS[2], reserved[i]) end
end
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[4])
  return 1
end
if redis.call('ZCARD', KEYS[1]) + redis.call('HLEN', KEYS[2]) >= tonumber(ARGV[2]) then return 0 end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[4])
return 1
`;

/** KEYS: sessions, reserved. ARGV: member, sessionId, add ('1') or remove ('0'). */
const indexLua = `
if ARGV[3] == '1' then redis.call('ZADD', KEYS[1], 0, ARGV[1])
else redis.call('ZREM', KEYS[1], ARGV[1]) end
redis.call('HDEL', KEYS[2], ARGV[2])
return 1
`;

const names = { reserve: 'runplaneReserveSession', index: 'runplaneIndexSession' } as const;
type ScriptCall = (...args: Array<string | number>) => Promise<unknown>;

/** Widest `createdAt` the index member holds (16 digits: every safe integer). */
const createdAtDigits = 16;

/**
 * @internal The index member of a session: `createdAt` zero-padded, so that byte order is
 * `createdAt` order, then the id (SQLite's BINARY order of the list's tie-break).
 *
 * @throws {@link InvalidArgumentError} (`INVALID_ARGUMENT`) for a `createdAt` that is not a
 *   non-negative safe integer
 */
export function toIndexMember(createdAt: number, sessionId: string): string {
  if (!Number.isSafeInteger(createdAt) || createdAt < 0) {
    throw new InvalidArgumentError(
      'createdAt',
      `expected \`createdAt\` to be a non-negative safe integer (ms), got ${String(createdAt)}`,
    );
  }
  return `${String(createdAt).padStart(createdAtDigits, '0')}:${sessionId}`;
}

/** @internal The `sessionId` of an index member. */
export const fromIndexMember = (member: string): string => member.slice(createdAtDigits + 1);

/** @internal The owner index's scripts on one connection. */
export interface OwnerIndex {
  /**
   * Reserves a session slot of the owner's quota, cluster-wide: answers `reserved` while the
   * owner's indexed sessions and live reservations are under `max`, else `full`. Reserving an id
   * already reserved renews its hold.
   *
   * @param at - now, clock ms; the reservation expires at `at + holdMs`
   */
  reserve(
    ownerId: string,
    sessionId: string,
    quota: { readonly max: number; readonly at: number; readonly holdMs: number },
  ): Promise<'reserved' | 'full'>;
  /** Drops a reservation that no create followed (the id was taken, the create failed). */
  release(ownerId: string, sessionId: string): Promise<void>;
  /** Lists the session in the owner's index and drops its reservation (idempotent). */
  add(ownerId: string, sessionId: string, createdAt: number): Promise<void>;
  /** Removes the session from the index and drops its reservation (idempotent). */
  remove(ownerId: string, sessionId: string, createdAt: number): Promise<void>;
  /** The owner's keys. */
  keysOf(ownerId: string): OwnerKeys;
}

/** @internal Defines the owner index's scripts on `redis` and returns them. */
export function createOwnerIndex(redis: Redis, keyPrefix: string): OwnerIndex {
  if (!(names.index in redis)) {
    redis.defineCommand(names.reserve, { numberOfKeys: 2, lua: reserveLua });
    redis.defineCommand(names.index, { numberOfKeys: 2, lua: indexLua });
  }
  const call = (name: string): ScriptCall =>
    (redis as unknown as Record<string, ScriptCall>)[name]!.bind(redis);
  const keysOf = (ownerId: string) => toOwnerKeys(ownerId, keyPrefix);
  const index = async (ownerId: string, sessionId: string, createdAt: number, add: boolean) => {
    const keys = keysOf(ownerId);
    const member = toIndexMember(createdAt, sessionId);
    await call(names.index)(keys.sessions, keys.reservedSessions, member, sessionId, add ? 1 : 0);
  };
  return {
    async reserve(ownerId, sessionId, { max, at, holdMs }) {
      const keys = keysOf(ownerId);
      const reply = await call(names.reserve)(
        keys.sessions,
        keys.reservedSessions,
        sessionId,
        max,
        at,
        at + holdMs,
      );
      return reply === 1 ? 'reserved' : 'full';
    },
    async release(ownerId, sessionId) {
      await redis.hdel(keysOf(ownerId).reservedSessions, sessionId);
    },
    add: (ownerId, sessionId, createdAt) => index(ownerId, sessionId, createdAt, true),
    remove: (ownerId, sessionId, createdAt) => index(ownerId, sessionId, createdAt, false),
    keysOf,
  };
}
