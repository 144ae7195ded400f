/**
 * Idempotency keys on Redis (docs/architecture.md, "Cluster on Redis"): per owner, in the
 * owner's hash tag, shared by every instance. Each method is one Lua script, so a claim is
 * atomic across instances: two instances that receive the same key at once never both apply
 * the request. Semantics are the SQLite store's (`stores/sqlite/idempotency-keys.ts`): expired
 * keys are forgotten first, the owner's live keys are counted against `maxKeysPerOwner`, the
 * first answer wins, `release` forgets only a key without an answer.
 *
 * Numbers are computed by the caller and passed as text (Lua's `tostring` would round a ms
 * timestamp); the answer's JSON is stored as the caller encoded it (Redis's `cjson` would turn
 * `[]` into `{}`).
 *
 * @module
 * @internal
 */
import type { Redis } from 'ioredis';
import type { IdempotencyKeyAccess } from '../server/session-access.js';
import type { IdempotencyClaim, StoredAnswer } from '../stores/idempotency-keys.js';
import { toOwnerKeys } from './owner-keys.js';
import { recordStoreFailed } from './redis-run-records.js';

/** KEYS: entries, ages, answers. */
const keyCount = 3;

/**
 * ARGV: key, fingerprint, at, expiredAt (at − ttl), lockedUntil (at + lock), max.
 * Returns {'claimed'}, {'answered', json}, {'in_progress', lockedUntil}, {'reused'}, {'full'}.
 */
const beginLua = `
local expired = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[4])
for i = 1, #expired do
  redis.call('HDEL', KEYS[1], expired[i])
  redis.call('HDEL', KEYS[3], expired[i])
end
if #expired > 0 then redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[4]) end
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if raw then
  local entry = cjson.decode(raw)
  if entry.f ~= ARGV[2] then return {'reused'} end
  local answer = redis.call('HGET', KEYS[3], ARGV[1])
  if answer then return {'answered', answer} end
  if tonumber(entry.l) > tonumber(ARGV[3]) then return {'in_progress', entry.l} end
  entry.l = ARGV[5]
  redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(entry))
  return {'claimed'}
end
if redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[6]) then return {'full'} end
redis.call('HSET', KEYS[1], ARGV[1], cjson.encode({f = ARGV[2], l = ARGV[5]}))
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
return {'claimed'}
`;

/** ARGV: key, answer JSON, sessionId or ''. The first answer wins. Returns 1 when kept. */
const completeLua = `
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw or redis.call('HEXISTS', KEYS[3], ARGV[1]) == 1 then return 0 end
if ARGV[3] ~= '' then
  local entry = cjson.decode(raw)
  entry.s = ARGV[3]
  redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(entry))
end
redis.call('HSET', KEYS[3], ARGV[1], ARGV[2])
return 1
`;

/** ARGV: key. Forgets a key without an answer. */
const releaseLua = `
if redis.call('HEXISTS', KEYS[3], ARGV[1]) == 1 then return 0 end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
return 1
`;

/** ARGV: sessionId. Forgets every answered key about the session. */
const forgetSessionLua = `
local all = redis.call('HGETALL', KEYS[1])
local n = 0
for i = 1, #all, 2 do
  if cjson.decode(all[i + 1]).s == ARGV[1] then
    redis.call('HDEL', KEYS[1], all[i])
    redis.call('HDEL', KEYS[3], all[i])
    redis.call('ZREM', KEYS[2], all[i])
    n = n + 1
  end
end
return n
`;

const names = {
  begin: 'runplaneIdempotencyBegin',
  complete: 'runplaneIdempotencyComplete',
  release: 'runplaneIdempotencyRelease',
  forgetSession: 'runplaneIdempotencyForgetSession',
} as const;
type ScriptCall = (...args: Array<string | number>) => Promise<unknown>;

const toAnswer = (json: string): StoredAnswer => {
  try {
    return JSON.parse(json) as StoredAnswer;
  } catch (error) {
    throw recordStoreFailed('idempotency keys begin', 'a stored answer is not JSON', error);
  }
};

/**
 * @internal Creates the cluster's idempotency keys on `redis` under `keyPrefix` (async: they
 * plug into `SessionAccess.idempotencyKeys`, with no mirror).
 *
 * @returns the {@link IdempotencyKeyAccess}; each method rejects with `RunplaneError`
 *   (`STORE_FAILED`) for a stored answer that is not JSON, and with the connection's error
 */
export function createRedisIdempotencyKeys(options: {
  readonly redis: Redis;
  readonly keyPrefix: string;
}): IdempotencyKeyAccess {
  const { redis, keyPrefix } = options;
  if (!(names.begin in redis)) {
    redis.defineCommand(names.begin, { numberOfKeys: keyCount, lua: beginLua });
    redis.defineCommand(names.complete, { numberOfKeys: keyCount, lua: completeLua });
    redis.defineCommand(names.release, { numberOfKeys: keyCount, lua: releaseLua });
    redis.defineCommand(names.forgetSession, { numberOfKeys: keyCount, lua: forgetSessionLua });
  }
  const call = (name: string, ownerId: string, ...args: Array<string | number>) => {
    const keys = toOwnerKeys(ownerId, keyPrefix);
    const script = (redis as unknown as Record<string, ScriptCall>)[name]!.bind(redis);
    return script(keys.idempotencyKeys, keys.idempotencyAges, keys.idempotencyAnswers, ...args);
  };
  return {
    async begin(request): Promise<IdempotencyClaim> {
      const [outcome, value] = (await call(
        names.begin,
        request.ownerId,
        request.key,
        request.fingerprint,
        String(request.at),
        String(request.at - request.ttlMs),
        String(request.at + request.lockMs),
        String(request.maxKeysPerOwner),
      )) as [string, string | undefined];
      switch (outcome) {
        case 'answered':
          return { outcome, answer: toAnswer(value ?? '') };
        case 'in_progress':
          return { outcome, lockedUntil: Number(value) };
        case 'claimed':
        case 'reused':
        case 'full':
          return { outcome };
        default:
          throw recordStoreFailed('idempotency keys begin', `unknown reply ${String(outcome)}`);
      }
    },
    async complete(ownerId, key, answer) {
      await call(names.complete, ownerId, key, JSON.stringify(answer), answer.sessionId ?? '');
    },
    async release(ownerId, key) {
      await call(names.release, ownerId, key);
    },
    async forgetSession(ownerId, sessionId) {
      await call(names.forgetSession, ownerId, sessionId);
    },
  };
}
