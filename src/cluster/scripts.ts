/**
 * The Lua scripts of a cluster: the fenced lease (acquire, renew, release), the fenced batch
 * of the write-behind and the bounded append to a command Stream (docs/architecture.md,
 * "Cluster on Redis"). Each touches the keys of one
 * session only and declares them all in KEYS, so each runs on one slot.
 *
 * @module
 * @internal
 */
import type { ChainableCommander, Redis } from 'ioredis';
import { InvalidArgumentError } from '../errors.js';

/**
 * Grants the lease when nobody holds it: `INCR fence`, then `SET lease <instance>:<fence> NX PX`.
 * KEYS: lease, fence. ARGV: instance id, ttl in ms. Returns `{1, fence}` or `{0, holder}`.
 * `PERSIST`: a purge leaves the fence of a purged session to expire (`redis-session-purge.ts`);
 * a session made again under its id keeps the fence for good, so its fences only grow.
 */
const acquireLua = `
local holder = redis.call('GET', KEYS[1])
if holder then return {0, holder} end
local fence = redis.call('INCR', KEYS[2])
redis.call('PERSIST', KEYS[2])
redis.call('SET', KEYS[1], ARGV[1] .. ':' .. fence, 'NX', 'PX', ARGV[2])
return {1, fence}
`;

/** Extends the lease only while it still names this holder. KEYS: lease. ARGV: value, ttl ms. */
const renewLua = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
`;

/** Compare-and-delete. KEYS: lease. ARGV: value. Returns 1 when it deleted the lease. */
const releaseLua = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
return 1
`;

/**
 * One batch of the write-behind, all or nothing: checks, then writes.
 *
 * KEYS: 1 lease, 2 fence, 3 seq, 4 batch, 5 events, 6 event-runs, 7 runs, 8 meta,
 * 9 commands-applied, 10 commands, 11.. the keys the ops write of their own (run records,
 * answers, the history).
 * ARGV: 1 lease value, 2 fence, 3 batch id, 4 tail channel, 5 first seq, 6 n events, then the n
 * event JSONs, then the count and ids of runs that logged in the batch, then the ops (see
 * `encodeOps` in outbox.ts). Every op is checked before anything is written: a script that
 * fails half-way keeps what it wrote.
 *
 * Returns `{'ok', lastSeq}`, `{'replayed', storedSeq}` (this batch id was the last applied: a
 * retry whose reply was lost), `{'stale_fence', storedFence}`, `{'seq_conflict', storedSeq}` or
 * `{'bad_batch', detail}`.
 */
const shipLua = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] or redis.call('GET', KEYS[2]) ~= ARGV[2] then
  return {'stale_fence', tonumber(redis.call('GET', KEYS[2]) or '0')}
end
local stored = tonumber(redis.call('GET', KEYS[3]) or '0')
if redis.call('GET', KEYS[4]) == ARGV[3] then return {'replayed', stored} end
local first = tonumber(ARGV[5])
local n = tonumber(ARGV[6])
if first ~= stored + 1 then return {'seq_conflict', stored} end
local runsAt = 7 + n
local nRuns = tonumber(ARGV[runsAt])
if nRuns == nil then return {'bad_batch', 'no run count'} end
local opsAt = runsAt + 1 + nRuns
local i = opsAt
while i <= #ARGV do
  local name = ARGV[i]
  if name == 'run.put' or name == 'run.merge' then
    local k = tonumber(ARGV[i + 1])
    local fields = tonumber(ARGV[i + 3])
    if k == nil or k < 11 or k > #KEYS or fields == nil then return {'bad_batch', name} end
    i = i + 4 + 2 * fields
  elseif name == 'meta.set' or name == 'meta.del' then
    local fields = tonumber(ARGV[i + 1])
    if fields == nil then return {'bad_batch', name} end
    if name == 'meta.set' then fields = 2 * fields end
    i = i + 2 + fields
  elseif name == 'commands.applied' then
    i = i + 2
  elseif name == 'command.answer' then
    local k = tonumber(ARGV[i + 1])
    if k == nil or k < 11 or k > #KEYS or tonumber(ARGV[i + 2]) == nil then
      return {'bad_batch', name}
    end
    i = i + 6
  elseif name == 'history.append' then
    local k = tonumber(ARGV[i + 1])
    local count = tonumber(ARGV[i + 3])
    if k == nil or k < 11 or k > #KEYS or tonumber(ARGV[i + 2]) == nil or count == nil then
      return {'bad_batch', name}
    end
    i = i + 4 + count
  elseif name == 'history.clear' then
    local k = tonumber(ARGV[i + 1])
    if k == nil or k < 11 or k > #KEYS then return {'bad_batch', name} end
    i = i + 2
  else
    return {'bad_batch', 'unknown op ' .. tostring(name)}
  end
end
if i ~= #ARGV + 1 then return {'bad_batch', 'truncated ops'} end
for j = 0, n - 1 do
  redis.call('XADD', KEYS[5], (first + j) .. '-0', 'e', ARGV[7 + j])
end
if nRuns > 0 then redis.call('SADD', KEYS[6], unpack(ARGV, runsAt + 1, runsAt + nRuns)) end
i = opsAt
while i <= #ARGV do
  local name = ARGV[i]
  if name == 'run.put' or name == 'run.merge' then
    local key = KEYS[tonumber(ARGV[i + 1])]
    local fields = tonumber(ARGV[i + 3])
    if name == 'run.put' then redis.call('DEL', key) end
    if fields > 0 then redis.call('HSET', key, unpack(ARGV, i + 4, i + 3 + 2 * fields)) end
    redis.call('SADD', KEYS[7], ARGV[i + 2])
    i = i + 4 + 2 * fields
  elseif name == 'meta.set' then
    local fields = tonumber(ARGV[i + 1])
    if fields > 0 then redis.call('HSET', KEYS[8], unpack(ARGV, i + 2, i + 1 + 2 * fields)) end
    i = i + 2 + 2 * fields
  elseif name == 'meta.del' then
    local fields = tonumber(ARGV[i + 1])
    if fields > 0 then redis.call('HDEL', KEYS[8], unpack(ARGV, i + 2, i + 1 + fields)) end
    i = i + 2 + fields
  elseif name == 'commands.applied' then
    redis.call('SET', KEYS[9], ARGV[i + 1])
    redis.call('XTRIM', KEYS[10], 'MINID', ARGV[i + 1])
    i = i + 2
  elseif name == 'command.answer' then
    redis.call('SET', KEYS[tonumber(ARGV[i + 1])], ARGV[i + 5], 'PX', ARGV[i + 2])
    redis.call('PUBLISH', ARGV[i + 3], ARGV[i + 4])
    i = i + 6
  elseif name == 'history.append' then
    local key = KEYS[tonumber(ARGV[i + 1])]
    local count = tonumber(ARGV[i + 3])
    -- In slices: unpack of thousands of values would overflow Lua's stack mid-script.
    for from = i + 4, i + 3 + count, 1000 do
      redis.call('RPUSH', key, unpack(ARGV, from, math.min(from + 999, i + 3 + count)))
    end
    if count > 0 then redis.call('HINCRBY', KEYS[8], 'history:bytes', ARGV[i + 2]) end
    i = i + 4 + count
  else
    redis.call('DEL', KEYS[tonumber(ARGV[i + 1])])
    redis.call('HDEL', KEYS[8], 'history:bytes')
    i = i + 2
  end
end
redis.call('SET', KEYS[4], ARGV[3])
if n == 0 then return {'ok', stored} end
local last = first + n - 1
redis.call('SET', KEYS[3], last)
redis.call('PUBLISH', ARGV[4], last)
return {'ok', last}
`;

/**
 * Appends a command to a session's command Stream unless it holds `max` entries already, says
 * who holds the session's lease (so the sender knows whether to take it), and nudges the holder
 * in the same step: no round trip of the sender's between the entry and its nudge.
 * KEYS: commands, lease. ARGV: max entries, request id, instance id, command JSON, the channel
 * prefix of instances (`''`: no nudge), the nudge's JSON without its closing brace.
 * The nudge goes to the holder's channel unless nobody or the sender itself holds the lease; the
 * script ends its JSON with `"e"` (the entry id) and `"p"` (the id of the Stream's last entry
 * before it, `0-0` when empty), so a holder whose applied cursor is `p` may apply the entry
 * from the nudge without reading the Stream (`cluster-session-access.ts`).
 * Returns `{'ok', entryId, holder}` (`holder` is `''` when nobody holds the lease) or
 * `{'full', length}`.
 */
const addCommandLua = `
local length = redis.call('XLEN', KEYS[1])
if length >= tonumber(ARGV[1]) then return {'full', length} end
local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
local prev = '0-0'
if #last > 0 then prev = last[1][1] end
local id = redis.call('XADD', KEYS[1], '*', 'r', ARGV[2], 'i', ARGV[3], 'c', ARGV[4])
local holder = redis.call('GET', KEYS[2]) or ''
if ARGV[5] ~= '' and holder ~= '' then
  local instance = string.match(holder, '^(.*):[^:]*$')
  if instance ~= nil and instance ~= ARGV[3] then
    redis.call('PUBLISH', ARGV[5] .. instance, ARGV[6] .. ',"e":"' .. id .. '","p":"' .. prev .. '"}')
  end
end
return {'ok', id, holder}
`;

/** A script's reply as ioredis gives it. */
type Reply = unknown;
type ScriptCall = (...args: Array<string | number>) => Promise<Reply>;

/** @internal The scripts, called on the command connection. */
export interface ClusterScripts {
  acquire(lease: string, fence: string, instanceId: string, ttlMs: number): Promise<Reply>;
  renew(lease: string, value: string, ttlMs: number): Promise<Reply>;
  release(lease: string, value: string): Promise<Reply>;
  /** `keys` and `args` as the ship script reads them (see its comment). */
  ship(keys: readonly string[], args: readonly string[]): Promise<Reply>;
  /** Appends a command to a session's command Stream, bounded (see `addCommandLua`). */
  addCommand(
    commands: string,
    lease: string,
    maxEntries: number,
    requestId: string,
    instanceId: string,
    json: string,
    channelPrefix: string,
    nudgeHead: string,
  ): Promise<Reply>;
  /** Queues calls on a pipeline of the connection; their replies come from `exec()`. */
  queue(pipeline: ChainableCommander): {
    renew(lease: string, value: string, ttlMs: number): void;
    ship(keys: readonly string[], args: readonly string[]): void;
  };
}

const names = {
  acquire: 'runplaneLeaseAcquire',
  renew: 'runplaneLeaseRenew',
  release: 'runplaneLeaseRelease',
  ship: 'runplaneShipBatch',
  addCommand: 'runplaneAddCommand',
} as const;

/**
 * @internal Defines the scripts on `redis` (ioredis sends `EVALSHA`, and the script once per
 * connection) and returns a way to call them on it, or to queue them on a pipeline of it.
 *
 * @throws {@link InvalidArgumentError} (`INVALID_ARGUMENT`) when the client has a `keyPrefix`:
 *   the cluster prefixes its keys itself, and pub/sub channels would not get it
 */
export function defineClusterScripts(redis: Redis): ClusterScripts {
  if (redis.options.keyPrefix) {
    throw new InvalidArgumentError(
      'redis',
      `expected \`redis\` to be a client without a keyPrefix (the cluster has its own), got ${JSON.stringify(redis.options.keyPrefix)}`,
    );
  }
  if (!(names.addCommand in redis)) {
    redis.defineCommand(names.acquire, { numberOfKeys: 2, lua: acquireLua });
    redis.defineCommand(names.renew, { numberOfKeys: 1, lua: renewLua });
    redis.defineCommand(names.release, { numberOfKeys: 1, lua: releaseLua });
    redis.defineCommand(names.ship, { lua: shipLua });
    redis.defineCommand(names.addCommand, { numberOfKeys: 2, lua: addCommandLua });
  }
  const on =
    (target: Redis | ChainableCommander) =>
    (name: string): ScriptCall =>
      (target as unknown as Record<string, ScriptCall>)[name]!.bind(target);
  const call = on(redis);
  return {
    acquire: (lease, fence, instanceId, ttlMs) =>
      call(names.acquire)(lease, fence, instanceId, ttlMs),
    renew: (lease, value, ttlMs) => call(names.renew)(lease, value, ttlMs),
    release: (lease, value) => call(names.release)(lease, value),
    ship: (keys, args) => call(names.ship)(keys.length, ...keys, ...args),
    addCommand: (commands, lease, maxEntries, requestId, instanceId, json, channelPrefix, head) =>
      call(names.addCommand)(
        commands,
        lease,
        maxEntries,
        requestId,
        instanceId,
        json,
        channelPrefix,
        head,
      ),
    queue(pipeline) {
      const queued = on(pipeline);
      return {
        renew: (lease, value, ttlMs) => void queued(names.renew)(lease, value, ttlMs),
        ship: (keys, args) => void queued(names.ship)(keys.length, ...keys, ...args),
      };
    },
  };
}
