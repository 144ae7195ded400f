/**
 * The checkpoint store of a cluster (docs/architecture.md, "Cluster on Redis", §8): a base (a
 * string of bytes) and its patches (a list), written by one script per call, so `set` (which
 * starts a new chain) and `delete` are atomic and `load` reads base and patches in one
 * transaction.
 *
 * A checkpoint id that names a session (a loop session's, `loop:["owner","session"]`) keeps
 * its keys under the session's hash tag; with `instance` given, its writes are **fenced**: only
 * the session's lease holder writes it, and Redis refuses the write of a holder whose lease or
 * fence is no longer current. Any other id has a tag of its own and is written unfenced.
 *
 * @module
 * @internal
 */
import type { Redis } from 'ioredis';
import { StaleFenceError } from '../errors.js';
import type { SessionKey, StoreContext } from '../events/event-log.js';
import { throwIfAborted, type CheckpointStore } from '../stores/checkpoint-store.js';
import type { ClusterInstance } from './cluster-instance.js';
import { defaultKeyPrefix, toSessionKeys } from './keys.js';
import { recordStoreFailed } from './redis-run-records.js';

/**
 * KEYS: lease, fence, base, patches. ARGV: op (`set`, `append`, `delete`), lease value ('' for
 * an unfenced write), fence, data. Returns {'ok', n}, {'stale_fence', storedFence} or
 * {'no_base'}.
 */
const writeLua = `
if ARGV[2] ~= '' and (redis.call('GET', KEYS[1]) ~= ARGV[2] or redis.call('GET', KEYS[2]) ~= ARGV[3]) then
  return {'stale_fence', redis.call('GET', KEYS[2]) or '0'}
end
if ARGV[1] == 'set' then
  redis.call('DEL', KEYS[4])
  redis.call('SET', KEYS[3], ARGV[4])
  return {'ok', 1}
elseif ARGV[1] == 'append' then
  if redis.call('EXISTS', KEYS[3]) == 0 then return {'no_base'} end
  return {'ok', redis.call('RPUSH', KEYS[4], ARGV[4])}
end
local n = redis.call('DEL', KEYS[3])
redis.call('DEL', KEYS[4])
return {'ok', n}
`;

const scriptName = 'runplaneCheckpointWrite';
type ScriptCall = (...args: Array<string | Buffer | number>) => Promise<unknown>;

/**
 * The session a checkpoint id names (`loop:` and the JSON of `[owner, session]`, as
 * `loop-sessions.ts` builds it), if it names one.
 */
function toCheckpointSession(checkpointId: string): SessionKey | undefined {
  if (!checkpointId.startsWith('loop:')) return undefined;
  try {
    const ids = JSON.parse(checkpointId.slice('loop:'.length)) as unknown;
    if (Array.isArray(ids) && ids.length === 2 && ids.every((id) => typeof id === 'string')) {
      return { ownerId: ids[0] as string, sessionId: ids[1] as string };
    }
  } catch {
    // not a session's id
  }
  return undefined;
}

/** The keys of one checkpoint, and the session whose lease fences its writes, if any. */
function toCheckpointKeys(prefix: string, checkpointId: string) {
  const session = toCheckpointSession(checkpointId);
  if (session !== undefined) {
    const keys = toSessionKeys(session, prefix);
    const base = `${prefix}${keys.tag}:checkpoint:${checkpointId}`;
    return { session, lease: keys.lease, fence: keys.fence, base, patches: `${base}:patches` };
  }
  const base = `${prefix}{c:${checkpointId.length}:${checkpointId}}:checkpoint`;
  // Never read for an unfenced write; named only so the script's keys share one slot.
  return { session, lease: base, fence: base, base, patches: `${base}:patches` };
}

/**
 * @internal The keys (base, patches) of a session's loop checkpoint, whose id is `loop:` and
 * the JSON of `[owner, session]` (`src/server/loop-sessions.ts`): what a purge deletes.
 */
export function toLoopCheckpointKeys(
  prefix: string,
  key: SessionKey,
): { readonly base: string; readonly patches: string } {
  const { base, patches } = toCheckpointKeys(
    prefix,
    `loop:${JSON.stringify([key.ownerId, key.sessionId])}`,
  );
  return { base, patches };
}

/** @internal Options of {@link createRedisCheckpointStore}. */
export interface RedisCheckpointStoreOptions {
  /** The connection (without `keyPrefix`). Never closed by the store. */
  readonly redis: Redis;
  /** @default 'rp:' */
  readonly keyPrefix?: string;
  /**
   * The cluster instance whose leases fence the writes of session checkpoints: such a write is
   * refused unless the instance holds the session, and Redis refuses it once its fence is
   * stale. Without it every write is unfenced.
   */
  readonly instance?: Pick<ClusterInstance, 'leaseOf'>;
}

/**
 * @internal Creates the cluster's {@link CheckpointStore} (incremental: `append` and `load`).
 *
 * @returns the store; a fenced write rejects with {@link StaleFenceError} (`STALE_FENCE`,
 *   reason `not_held` when the instance does not hold the session, `write_refused` when Redis
 *   has a newer fence); `append` with no base rejects with `RunplaneError` (`STORE_FAILED`)
 */
export function createRedisCheckpointStore(options: RedisCheckpointStoreOptions): CheckpointStore {
  const { redis, instance } = options;
  const prefix = options.keyPrefix ?? defaultKeyPrefix;
  if (!(scriptName in redis)) redis.defineCommand(scriptName, { numberOfKeys: 4, lua: writeLua });
  const script = (redis as unknown as Record<string, ScriptCall>)[scriptName]!.bind(redis);

  const write = async (
    op: 'set' | 'append' | 'delete',
    checkpointId: string,
    data?: Uint8Array,
  ) => {
    const keys = toCheckpointKeys(prefix, checkpointId);
    let lease = { value: '', fence: 0 };
    if (keys.session !== undefined && instance !== undefined) {
      const held = instance.leaseOf(keys.session);
      if (held === undefined) {
        throw new StaleFenceError(keys.session.ownerId, keys.session.sessionId, 0, 'not_held');
      }
      lease = held;
    }
    // A copy: the caller may change `data` while the command waits to be sent.
    const payload = data === undefined ? '' : Buffer.from(data);
    const reply = (await script(
      keys.lease,
      keys.fence,
      keys.base,
      keys.patches,
      op,
      lease.value,
      lease.fence,
      payload,
    )) as [string, number | string | undefined];
    if (reply[0] === 'ok') return Number(reply[1]);
    if (reply[0] === 'stale_fence' && keys.session !== undefined) {
      const { ownerId, sessionId } = keys.session;
      throw new StaleFenceError(
        ownerId,
        sessionId,
        lease.fence,
        'write_refused',
        `fence is now ${String(reply[1])}`,
      );
    }
    throw recordStoreFailed(`checkpoint ${op}`, `no checkpoint ${checkpointId} to append to`);
  };

  const copy = (data: Buffer) => new Uint8Array(data);

  return {
    async get(ctx: StoreContext, checkpointId: string) {
      throwIfAborted(ctx);
      const data = await redis.getBuffer(toCheckpointKeys(prefix, checkpointId).base);
      return data === null ? undefined : copy(data);
    },
    async set(ctx: StoreContext, checkpointId: string, data: Uint8Array) {
      throwIfAborted(ctx);
      await write('set', checkpointId, data);
    },
    async append(ctx: StoreContext, checkpointId: string, patch: Uint8Array) {
      throwIfAborted(ctx);
      await write('append', checkpointId, patch);
    },
    async load(ctx: StoreContext, checkpointId: string) {
      throwIfAborted(ctx);
      const keys = toCheckpointKeys(prefix, checkpointId);
      const replies = await redis
        .multi()
        .getBuffer(keys.base)
        .lrangeBuffer(keys.patches, 0, -1)
        .exec();
      const [[baseError, base], [patchesError, patches]] = (replies ?? []) as [
        [Error | null, Buffer | null],
        [Error | null, Buffer[]],
      ];
      const error = baseError ?? patchesError;
      if (error !== null) throw recordStoreFailed('checkpoint load', error.message, error);
      if (base === null) return undefined;
      return { base: copy(base), patches: patches.map(copy) };
    },
    async delete(ctx: StoreContext, checkpointId: string) {
      throwIfAborted(ctx);
      return (await write('delete', checkpointId)) > 0;
    },
  };
}
