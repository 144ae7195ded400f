/**
 * The purge of deleted sessions on Redis (docs/architecture.md, "Cluster on Redis"): the
 * {@link SessionPurge} the background sweep (`src/server/data-sweeper.ts`) drives on every
 * instance of a cluster.
 *
 * - **Which sessions**: the cluster's deleted sessions are a sorted set (`rp:deleted-sessions`,
 *   score `deletedAt`, member `[owner, session]` JSON). The set is outside the session's slot,
 *   so it follows the rule of two slots: the record is marked deleted first, in the session's
 *   fenced batch, and the set written after that batch is acknowledged
 *   ({@link addDeletedSession}, idempotent, `ZADD NX`), again before the delete's answer, again
 *   whenever the session's lease is taken, and by a list that meets the deleted record in the
 *   owner index. So a deleted session is in the set, or still in its owner's index.
 * - **One step** deletes a bounded slice of one session's keys in one script on its slot,
 *   refused (`'busy'`) while anyone holds the session's lease or a run it checks is unfinished:
 *   first its runs (a slice of ids at a time: their entries in the owner's run index go first,
 *   by a script on the owner's slot, then the run hashes, once each is checked finished), then
 *   the event Stream, the history List, the command Stream and a loop checkpoint's patches in
 *   slices (`XTRIM MINID` / `LTRIM`, at most `batchSize` entries and about a megabyte), the
 *   set of logged run ids (`SPOP`), and last the small keys and the meta hash holding the
 *   record (`UNLINK`). A purge cut short is resumed by the next sweep of any instance; two
 *   instances purging one session at once delete the same slices (every step is idempotent).
 * - The fence is not deleted: it expires a day after the purge (`fenceKeepMs`), and a session
 *   made again under the same id within the day keeps it (`acquire` persists it), so its fences
 *   only grow; a write held up for a day (a zombie holder's) cannot arrive.
 * - **Retention** (`--retention-days`) is not applied in a cluster: `idleIn` answers no idle
 *   sessions. Finding idle sessions would need a cluster-wide index of each session's last
 *   activity, written on the hot path.
 *
 * @module
 * @internal
 */
import type { Redis } from 'ioredis';
import { InvalidArgumentError, RunplaneError } from '../errors.js';
import type { SessionKey } from '../events/event-log.js';
import type { PurgeStepResult, SessionPurge } from '../stores/session-purge.js';
import { toSessionKeys } from './keys.js';
import { toDeletedSessionsKey, toOwnerKeys } from './owner-keys.js';
import { toLoopCheckpointKeys } from './redis-checkpoint-store.js';

/**
 * One purge step of a session. KEYS: 1 lease, 2 meta, 3 runs, 4 events, 5 event-runs,
 * 6 history, 7 commands, 8 commands-applied, 9 seq, 10 batch, 11 fence, 12 loop checkpoint
 * base, 13 its patches, 14.. the run hashes of the run ids in ARGV.
 * ARGV: 1 batch size, 2 max bytes per step, 3 fence keep ms, 4.. run ids (whose owner-index
 * entries are already gone) to delete.
 * Returns `{'held'}`, `{'gone'}` (no record: purged already), `{'live'}` (not deleted),
 * `{'corrupt'}`, `{'unfinished', runId}`, `{'runs', id…}` (delete these next, their owner index
 * first), `{'more'}` or `{'done'}`.
 */
const purgeLua = `
if redis.call('EXISTS', KEYS[1]) == 1 then return {'held'} end
local json = redis.call('HGET', KEYS[2], 'record')
if not json then return {'gone'} end
local ok, record = pcall(cjson.decode, json)
if not ok or type(record) ~= 'table' then return {'corrupt'} end
if record['deletedAt'] == nil or record['deletedAt'] == cjson.null then return {'live'} end
local limit = tonumber(ARGV[1])
local maxBytes = tonumber(ARGV[2])
if #ARGV >= 4 then
  for i = 4, #ARGV do
    local status = redis.call('HGET', KEYS[i + 10], 'status')
    if status == '"CREATED"' or status == '"QUEUED"' or status == '"RUNNING"' then
      return {'unfinished', ARGV[i]}
    end
  end
  redis.call('DEL', unpack(KEYS, 14, #KEYS))
  redis.call('SREM', KEYS[3], unpack(ARGV, 4, #ARGV))
  return {'more'}
end
local runIds = redis.call('SRANDMEMBER', KEYS[3], limit)
if #runIds > 0 then return {'runs', unpack(runIds)} end
-- A slice of a Stream or a List: at most limit entries, and entries while under maxBytes. One
-- entry read at a time, so a step never holds more than the slice and the entry after it.
local function slice(key, isStream)
  local bytes, count, from = 0, 0, '-'
  while true do
    local item
    if isStream then item = redis.call('XRANGE', key, from, '+', 'COUNT', 1)[1]
    else item = redis.call('LRANGE', key, count, count)[1] end
    if item == nil then
      if count == 0 then return false end
      redis.call('UNLINK', key)
      return true
    end
    if count >= limit or (count > 0 and bytes >= maxBytes) then
      if isStream then redis.call('XTRIM', key, 'MINID', item[1])
      else redis.call('LTRIM', key, count, -1) end
      return true
    end
    if isStream then
      for j = 2, #item[2], 2 do bytes = bytes + #item[2][j] end
      from = '(' .. item[1]
    else
      bytes = bytes + #item
    end
    count = count + 1
  end
end
if slice(KEYS[4], true) or slice(KEYS[6], false) or slice(KEYS[7], true) or slice(KEYS[13], false) then
  return {'more'}
end
if redis.call('SCARD', KEYS[5]) > limit then
  redis.call('SPOP', KEYS[5], limit)
  return {'more'}
end
redis.call('UNLINK', KEYS[4], KEYS[5], KEYS[7], KEYS[8], KEYS[9], KEYS[10], KEYS[12], KEYS[3])
redis.call('PEXPIRE', KEYS[11], ARGV[3])
redis.call('UNLINK', KEYS[2])
return {'done'}
`;

/**
 * Removes a session's runs from its owner's run index, each only while it names that session.
 * KEYS: the owner's run index. ARGV: session id, run ids. Returns how many it removed.
 */
const unindexRunsLua = `
local n = 0
for i = 2, #ARGV do
  if redis.call('HGET', KEYS[1], ARGV[i]) == ARGV[1] then
    redis.call('HDEL', KEYS[1], ARGV[i])
    n = n + 1
  end
end
return n
`;

const names = { purge: 'runplanePurgeSession', unindexRuns: 'runplaneUnindexRuns' } as const;
type ScriptCall = (...args: Array<string | number>) => Promise<unknown>;

/** About how many bytes of entries one step deletes at most (past it, one entry more). */
const defaultMaxBytesPerStep = 1_048_576;
/** The largest step: a step's run ids are unpacked onto Lua's stack (about 8,000 slots). */
const maxBatchSize = 1_000;
/** How long a purged session's fence is kept (see the module). */
const defaultFenceKeepMs = 86_400_000;

const toMember = (key: SessionKey) => JSON.stringify([key.ownerId, key.sessionId]);

/**
 * @internal Lists a deleted session for the purge (idempotent: `ZADD NX` keeps the first
 * deletion time). Call only once the record marked deleted is in Redis (two slots, one order).
 *
 * @param deletedAt - when it was deleted, clock ms (the order of the purge)
 */
export async function addDeletedSession(
  redis: Redis,
  keyPrefix: string,
  key: SessionKey,
  deletedAt: number,
): Promise<void> {
  await redis.zadd(toDeletedSessionsKey(keyPrefix), 'NX', deletedAt, toMember(key));
}

/**
 * @internal Reads a session's record and, when it is marked deleted, lists the session for the
 * purge ({@link addDeletedSession}); for a delete's answer, which knows no deletion time.
 */
export async function addDeletedSessionFromRecord(
  redis: Redis,
  keyPrefix: string,
  key: SessionKey,
): Promise<void> {
  const json = await redis.hget(toSessionKeys(key, keyPrefix).meta, 'record');
  if (json === null) return;
  const { deletedAt } = JSON.parse(json) as { deletedAt?: unknown };
  if (typeof deletedAt === 'number') await addDeletedSession(redis, keyPrefix, key, deletedAt);
}

/** @internal Options of {@link createRedisSessionPurge}. */
export interface RedisSessionPurgeOptions {
  /** The connection (without `keyPrefix`). Never closed by the purge. */
  readonly redis: Redis;
  /** The cluster's key prefix. */
  readonly keyPrefix: string;
  /** Called once a session's keys are all gone (e.g. to forget it in this instance's caches). */
  readonly onPurged?: (key: SessionKey) => void;
  /** About how many bytes of Stream or List entries one step deletes at most. @default 1048576 */
  readonly maxBytesPerStep?: number;
  /** How long the fence of a purged session is kept, in ms. @default 86400000 (a day) */
  readonly fenceKeepMs?: number;
}

/**
 * @internal Creates the purge of a cluster's deleted sessions (see the module).
 *
 * @returns the {@link SessionPurge}: `deleted` reads the cluster's deleted sessions, earliest
 *   deletion first; `idleIn` answers none (retention is not applied in a cluster);
 *   `purgeStep` answers `true` once nothing of the session is left (or its record is not
 *   deleted: a stale entry, dropped), `false` while more is left, `'busy'` while its lease is
 *   held or a run is unfinished. Each rejects with `RunplaneError` (`STORE_FAILED`) for a
 *   record that is not JSON, and with the client's error when Redis fails; `purgeStep` with
 *   `InvalidArgumentError` (`INVALID_ARGUMENT`) for a `batchSize` that is not an integer from 1
 *   to 1,000.
 * @example
 * ```ts
 * const purge = createRedisSessionPurge({ redis, keyPrefix: 'rp:' });
 * for (const key of await purge.deleted(10)) while ((await purge.purgeStep(key, 500)) === false);
 * ```
 */
export function createRedisSessionPurge(options: RedisSessionPurgeOptions): SessionPurge {
  const { redis, keyPrefix } = options;
  const maxBytes = options.maxBytesPerStep ?? defaultMaxBytesPerStep;
  const fenceKeepMs = options.fenceKeepMs ?? defaultFenceKeepMs;
  const deletedKey = toDeletedSessionsKey(keyPrefix);
  if (!(names.purge in redis)) {
    redis.defineCommand(names.purge, { lua: purgeLua });
    redis.defineCommand(names.unindexRuns, { numberOfKeys: 1, lua: unindexRunsLua });
  }
  const call = (name: string): ScriptCall =>
    (redis as unknown as Record<string, ScriptCall>)[name]!.bind(redis);

  const step = async (key: SessionKey, batchSize: number, runIds: readonly string[]) => {
    const keys = toSessionKeys(key, keyPrefix);
    const checkpoint = toLoopCheckpointKeys(keyPrefix, key);
    const scriptKeys = [
      keys.lease,
      keys.meta,
      keys.runs,
      keys.events,
      keys.eventRuns,
      keys.history,
      keys.commands,
      keys.commandsApplied,
      keys.seq,
      keys.batch,
      keys.fence,
      checkpoint.base,
      checkpoint.patches,
      ...runIds.map((runId) => keys.run(runId)),
    ];
    const args = [batchSize, maxBytes, fenceKeepMs, ...runIds];
    return (await call(names.purge)(scriptKeys.length, ...scriptKeys, ...args)) as string[];
  };

  /** Drops the session's entry; `purged`: its keys are gone (not a live session's stale entry). */
  const finish = async (key: SessionKey, purged: boolean): Promise<true> => {
    await redis.zrem(deletedKey, toMember(key));
    if (purged) options.onPurged?.(key);
    return true;
  };

  return {
    async deleted(limit) {
      const members = await redis.zrange(deletedKey, 0, limit - 1);
      return members.map((member) => {
        const [ownerId, sessionId] = JSON.parse(member) as [string, string];
        return { ownerId, sessionId };
      });
    },

    idleIn: () => ({ idle: [], next: undefined }),

    async purgeStep(key, batchSize): Promise<PurgeStepResult> {
      if (!Number.isSafeInteger(batchSize) || batchSize < 1 || batchSize > maxBatchSize) {
        throw new InvalidArgumentError(
          'batchSize',
          `expected \`batchSize\` to be an integer from 1 to ${maxBatchSize}, got ${String(batchSize)}`,
        );
      }
      let reply = await step(key, batchSize, []);
      if (reply[0] === 'runs') {
        // The owner's run index first (another slot): an indexed run always has its hash.
        const runIds = reply.slice(1);
        const ownerRuns = toOwnerKeys(key.ownerId, keyPrefix).runs;
        await call(names.unindexRuns)(ownerRuns, key.sessionId, ...runIds);
        reply = await step(key, batchSize, runIds);
      }
      switch (reply[0]) {
        case 'more':
          return false;
        case 'held':
        case 'unfinished':
          return 'busy';
        case 'done':
        case 'gone':
          return finish(key, true);
        case 'live':
          return finish(key, false);
        default:
          throw new RunplaneError(
            'STORE_FAILED',
            `session purge: the record of session ${JSON.stringify(key.sessionId)} is not JSON`,
          );
      }
    },
  };
}
