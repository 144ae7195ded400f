/**
 * Session records on Redis (docs/architecture.md, "Cluster on Redis"): a session's record is
 * the `record` field of its meta hash (the record's JSON, with `deletedAt` once deleted), in the
 * session's own hash tag; the owner's list is the owner index (`redis-owner-index.ts`), in the
 * owner's tag.
 *
 * - {@link createRedisSessionRecords}: the holder's {@link SessionRecords}, a synchronous mirror
 *   of the sessions this instance holds; each write queues a `meta.set` op in the session's
 *   outbox (fenced, in order with its events). Once the batch is acknowledged the owner index
 *   (and the cluster's list of loop sessions) is brought in line.
 * - {@link createSessionRecordReader}: reads for any instance, from Redis only.
 *
 * Two slots, so the order makes the index safe: the record is written first, the index after
 * (a listed session always has its record); a lost index write is repaired when the session's
 * lease is next taken (the loader writes the index again), and a list drops and removes an
 * entry whose record is gone or deleted. A deleted session is listed for the purge
 * (`redis-session-purge.ts`) before it leaves its owner's index, so it is always in one of them.
 *
 * @module
 * @internal
 */
import type { Redis } from 'ioredis';
import { StaleFenceError } from '../errors.js';
import { toSessionKeyString, type SessionKey } from '../events/event-log.js';
import type { SessionCursor, SessionRecord, SessionRecords } from '../stores/session-records.js';
import type { ClusterInstance } from './cluster-instance.js';
import { toSessionKeys } from './keys.js';
import { toLoopSessionsKey } from './owner-keys.js';
import { createOwnerIndex, fromIndexMember, toIndexMember } from './redis-owner-index.js';
import { recordStoreFailed } from './redis-run-records.js';
import { addDeletedSession } from './redis-session-purge.js';

/** The meta hash field that holds the record. */
const recordField = 'record';

/** A session record as stored: the record, and when it was marked deleted. */
interface StoredSession extends SessionRecord {
  readonly deletedAt?: number | undefined;
  /** A loop session whose loop may owe an answer (`SessionRecords.markLoopOwes`); absent: none. */
  readonly loopOwes?: boolean | undefined;
}

const toStored = (json: string | null): StoredSession | undefined => {
  if (json === null) return undefined;
  try {
    const stored = JSON.parse(json) as StoredSession;
    return {
      ...stored,
      approvalTimeoutMs: stored.approvalTimeoutMs ?? undefined,
      // A record written before the failover policy existed is `mark`.
      failover: stored.failover ?? 'mark',
    };
  } catch (error) {
    throw recordStoreFailed('session records read', 'a session record is not JSON', error);
  }
};

/** The record without its deletion mark. */
const toRecord = ({
  deletedAt: _deletedAt,
  loopOwes: _loopOwes,
  ...record
}: StoredSession): SessionRecord => record;

const live = (stored: StoredSession | undefined): SessionRecord | undefined =>
  stored === undefined || stored.deletedAt !== undefined ? undefined : toRecord(stored);

const loopMember = (key: SessionKey) => JSON.stringify([key.ownerId, key.sessionId]);

/** Newest first: `createdAt`, then `sessionId`, descending (the SQLite list's order). */
const newestFirst = (a: SessionRecord, b: SessionRecord) =>
  b.createdAt - a.createdAt || (a.sessionId < b.sessionId ? 1 : a.sessionId > b.sessionId ? -1 : 0);

const isAfter = (record: SessionRecord, after: SessionCursor | undefined) =>
  after === undefined ||
  record.createdAt < after.createdAt ||
  (record.createdAt === after.createdAt && record.sessionId < after.sessionId);

/** Brings the owner index and the loop list in line with a session's stored record. */
async function syncIndexes(
  redis: Redis,
  keyPrefix: string,
  key: SessionKey,
  stored: StoredSession,
): Promise<void> {
  const index = createOwnerIndex(redis, keyPrefix);
  const loops = toLoopSessionsKey(keyPrefix);
  // Issued together, so a later command on the same connection comes after both.
  if (stored.deletedAt === undefined) {
    await Promise.all([
      index.add(key.ownerId, key.sessionId, stored.createdAt),
      stored.mode === 'loop' ? redis.zadd(loops, stored.createdAt, loopMember(key)) : undefined,
    ]);
  } else {
    // Listed for the purge before it leaves the index (issued in this order on one
    // connection, which Redis applies in order): a deleted session is always in one of them.
    await Promise.all([
      addDeletedSession(redis, keyPrefix, key, stored.deletedAt),
      index.remove(key.ownerId, key.sessionId, stored.createdAt),
      redis.zrem(loops, loopMember(key)),
    ]);
  }
}

/** @internal Reads of session records, for any instance. */
export interface SessionRecordReader {
  /** The live session, or `undefined` (another owner's, deleted, or none). */
  get(ownerId: string, sessionId: string): Promise<SessionRecord | undefined>;
  /** The owner's live sessions, newest first, after `page.after`; at most `page.limit`. */
  list(
    ownerId: string,
    page: { readonly after?: SessionCursor | undefined; readonly limit: number },
  ): Promise<SessionRecord[]>;
  /** How many live sessions the owner's index lists. */
  count(ownerId: string): Promise<number>;
  /** Every live loop session of the cluster, oldest first. */
  listLoops(): Promise<SessionKey[]>;
}

/**
 * @internal Creates the session-record reads on `redis` under `keyPrefix`.
 *
 * @remarks Every method rejects with `RunplaneError` (`STORE_FAILED`) for a corrupt record;
 * `list` with `InvalidArgumentError` (`INVALID_ARGUMENT`) for a cursor whose `createdAt` is not
 * a non-negative safe integer.
 */
export function createSessionRecordReader(options: {
  readonly redis: Redis;
  readonly keyPrefix: string;
}): SessionRecordReader {
  const { redis, keyPrefix } = options;
  const index = createOwnerIndex(redis, keyPrefix);
  const metaOf = (ownerId: string, sessionId: string) =>
    toSessionKeys({ ownerId, sessionId }, keyPrefix).meta;

  return {
    async get(ownerId, sessionId) {
      return live(toStored(await redis.hget(metaOf(ownerId, sessionId), recordField)));
    },

    async list(ownerId, { after, limit }) {
      const { sessions } = index.keysOf(ownerId);
      const out: SessionRecord[] = [];
      let max = after === undefined ? '+' : `(${toIndexMember(after.createdAt, after.sessionId)}`;
      while (out.length < limit) {
        const want = limit - out.length;
        const members = await redis.zrevrangebylex(sessions, max, '-', 'LIMIT', 0, want);
        if (members.length === 0) break;
        const pipeline = redis.pipeline();
        for (const member of members)
          pipeline.hget(metaOf(ownerId, fromIndexMember(member)), recordField);
        const replies = (await pipeline.exec()) ?? [];
        const stale: string[] = [];
        const deleted: Array<Promise<void>> = [];
        members.forEach((member, i) => {
          const [error, json] = replies[i] ?? [new Error('no reply'), null];
          if (error !== null) throw recordStoreFailed('session records list', error.message, error);
          const stored = toStored(json as string | null);
          const record = live(stored);
          if (record !== undefined) out.push(record);
          else {
            stale.push(member);
            if (stored?.deletedAt !== undefined) {
              const key = { ownerId, sessionId: stored.sessionId };
              deleted.push(addDeletedSession(redis, keyPrefix, key, stored.deletedAt));
            }
          }
        });
        // Repair (see the module): a deleted session is listed for the purge before it leaves.
        await Promise.all(deleted);
        if (stale.length > 0) await redis.zrem(sessions, ...stale);
        if (members.length < want) break;
        max = `(${members[members.length - 1]!}`;
      }
      return out;
    },

    count: (ownerId) => redis.zcard(index.keysOf(ownerId).sessions),

    async listLoops() {
      const members = await redis.zrange(toLoopSessionsKey(keyPrefix), 0, -1);
      return members.map((member) => {
        const [ownerId, sessionId] = JSON.parse(member) as [string, string];
        return { ownerId, sessionId };
      });
    },
  };
}

/**
 * @internal Creates the holder's session records on `instance` (and adds their mirror to it).
 *
 * @remarks Only sessions this instance holds are found: `list`, `count` and `listLoops` answer
 * for them (the cluster-wide reads are {@link createSessionRecordReader}'s). `create` of an id
 * that exists, deleted or not, answers `undefined`, as SQLite's does until the purge.
 *
 * @returns the {@link SessionRecords}; a write for a session not held here throws
 *   {@link StaleFenceError} (`STALE_FENCE`)
 */
export function createRedisSessionRecords(instance: ClusterInstance): SessionRecords {
  const { redis, keyPrefix } = instance;
  /** Held sessions, by session key string: the stored record, or `undefined` when there is none. */
  const held = new Map<string, StoredSession | undefined>();

  instance.addMirror({
    async load(key, keys) {
      const stored = toStored(await redis.hget(keys.meta, recordField));
      held.set(toSessionKeyString(key), stored);
      if (stored !== undefined) await syncIndexes(redis, keyPrefix, key, stored);
    },
    forget: (key) => void held.delete(toSessionKeyString(key)),
  });

  const storedOf = (key: SessionKey): StoredSession | undefined => {
    const k = toSessionKeyString(key);
    if (!held.has(k)) throw new StaleFenceError(key.ownerId, key.sessionId, 0, 'not_held');
    return held.get(k);
  };

  /** Writes a record: the mirror, the outbox, then (once shipped) the indexes. */
  const put = (key: SessionKey, stored: StoredSession, indexes: boolean) => {
    instance.write(key, { op: 'meta.set', fields: { [recordField]: JSON.stringify(stored) } });
    held.set(toSessionKeyString(key), stored);
    if (!indexes) return;
    instance.flushed(key).then(
      () => syncIndexes(redis, keyPrefix, key, stored).catch(() => undefined),
      () => undefined, // lost: the next holder's load repairs the index
    );
  };

  const mine = () =>
    [...held.values()].flatMap((stored) => {
      const record = live(stored);
      return record === undefined ? [] : [record];
    });

  return {
    create({ ownerId, sessionId, strategy, graceMs, approvalTimeoutMs, mode, failover, at }) {
      const key = { ownerId, sessionId };
      if (storedOf(key) !== undefined) return undefined;
      const record: SessionRecord = {
        ownerId,
        sessionId,
        mode: mode ?? 'runs',
        strategy,
        graceMs,
        approvalTimeoutMs,
        failover: failover ?? 'mark',
        createdAt: at,
        updatedAt: at,
      };
      toIndexMember(at, sessionId); // refuses a createdAt the index cannot order, before any write
      put(key, record, true);
      return record;
    },

    get(ownerId, sessionId) {
      return live(held.get(toSessionKeyString({ ownerId, sessionId })));
    },

    update(ownerId, sessionId, changes, at) {
      const key = { ownerId, sessionId };
      const stored = held.get(toSessionKeyString(key));
      const record = live(stored);
      if (stored === undefined || record === undefined) return undefined;
      const next: StoredSession = {
        ...stored,
        strategy: changes.strategy ?? record.strategy,
        graceMs: changes.graceMs ?? record.graceMs,
        approvalTimeoutMs: changes.approvalTimeoutMs ?? record.approvalTimeoutMs,
        failover: changes.failover ?? record.failover,
        updatedAt: at,
      };
      put(key, next, false);
      return toRecord(next);
    },

    list(ownerId, { after, limit }) {
      return mine()
        .filter((record) => record.ownerId === ownerId && isAfter(record, after))
        .sort(newestFirst)
        .slice(0, limit);
    },

    listLoops(filter) {
      return [...held.values()]
        .filter(
          (stored): stored is StoredSession =>
            live(stored)?.mode === 'loop' && (filter?.owing !== true || stored?.loopOwes === true),
        )
        .sort((a, b) => a.createdAt - b.createdAt)
        .map(({ ownerId, sessionId }) => ({ ownerId, sessionId }));
    },

    count: (ownerId) => mine().filter((record) => record.ownerId === ownerId).length,

    markLoopOwes(ownerId, sessionId, owes) {
      const key = { ownerId, sessionId };
      const stored = held.get(toSessionKeyString(key));
      if (live(stored)?.mode !== 'loop' || stored === undefined) return;
      if ((stored.loopOwes === true) === owes) return;
      put(key, { ...stored, loopOwes: owes }, false);
    },

    markDeleted(ownerId, sessionId, at) {
      const key = { ownerId, sessionId };
      const record = live(held.get(toSessionKeyString(key)));
      if (record === undefined) return false;
      put(key, { ...record, deletedAt: at }, true);
      return true;
    },
  };
}
