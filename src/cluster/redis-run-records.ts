/**
 * Run records on Redis (docs/architecture.md, "Cluster on Redis"): one hash per run under its
 * session's hash tag, a field per record field (the value's JSON), and the session's set of
 * run ids.
 *
 * - {@link createRedisRunRecords}: the holder's {@link RunRecords}, a synchronous mirror of the
 *   runs of the sessions this instance holds. Each write changes the mirror and queues a
 *   `run.put`/`run.merge` op in the session's outbox, shipped in order with its events by the
 *   fenced batch script. The mirror is loaded when a lease is taken.
 * - {@link createRunRecordReader}: reads for any instance, from Redis only.
 *
 * The owner's run index (`runId → sessionId`, for `get(ownerId, runId)`) is in the owner's
 * tag, another slot: it is written after the batch that created the run is acknowledged, and
 * written again for every run of a session each time its lease is taken (idempotent), which
 * repairs an index write that a crash or a cut connection lost.
 *
 * @module
 * @internal
 */
import type { Redis } from 'ioredis';
import type { RunStatus } from '../../machines/run.machine.js';
import { RunplaneError, StaleFenceError } from '../errors.js';
import { toSessionKeyString, type SessionKey } from '../events/event-log.js';
import type { RunRecord, RunRecordOutcome, RunRecords } from '../stores/run-records.js';
import type { ClusterInstance } from './cluster-instance.js';
import { toSessionKeys, type SessionKeys } from './keys.js';
import { toOwnerKeys } from './owner-keys.js';

const unfinished = new Set<RunStatus>(['CREATED', 'QUEUED', 'RUNNING']);

/** @internal A `STORE_FAILED` error of the Redis record stores. */
export const recordStoreFailed = (what: string, detail: string, cause?: unknown): RunplaneError =>
  new RunplaneError('STORE_FAILED', `${what}: ${detail}`, cause === undefined ? {} : { cause });

/** A record's fields as the run hash holds them (JSON values). */
const toFields = (record: Partial<RunRecord>): Record<string, unknown> => ({ ...record });

/** Decodes a run hash (`HGETALL`), or `undefined` for an empty one. */
function toRunRecord(hash: Record<string, string>): RunRecord | undefined {
  if (Object.keys(hash).length === 0) return undefined;
  const fields: Record<string, unknown> = {};
  for (const [field, json] of Object.entries(hash)) {
    try {
      fields[field] = JSON.parse(json) as unknown;
    } catch (error) {
      throw recordStoreFailed('run records read', `field ${field} is not JSON`, error);
    }
  }
  const record = fields as unknown as RunRecord;
  if (typeof record.runId !== 'string' || typeof record.status !== 'string') {
    throw recordStoreFailed('run records read', `a run hash without runId or status`);
  }
  return {
    runId: record.runId,
    ownerId: record.ownerId,
    sessionId: record.sessionId,
    status: record.status,
    input: record.input,
    createdAt: record.createdAt,
    updatedAt: record.updatedAt,
    endedAt: record.endedAt ?? undefined,
    outcome: record.outcome ?? undefined,
  };
}

/** Reads the run records of a session (its set of run ids, then each hash). */
async function readSessionRuns(redis: Redis, keys: SessionKeys): Promise<RunRecord[]> {
  const runIds = await redis.smembers(keys.runs);
  if (runIds.length === 0) return [];
  const pipeline = redis.pipeline();
  for (const runId of runIds) pipeline.hgetall(keys.run(runId));
  const replies = (await pipeline.exec()) ?? [];
  const records: RunRecord[] = [];
  for (const [error, hash] of replies) {
    if (error !== null) throw recordStoreFailed('run records read', error.message, error);
    const record = toRunRecord(hash as Record<string, string>);
    if (record !== undefined) records.push(record);
  }
  return records;
}

const byAge = (a: RunRecord, b: RunRecord) =>
  a.createdAt - b.createdAt || (a.runId < b.runId ? -1 : a.runId > b.runId ? 1 : 0);

/** @internal Reads of run records, for any instance. */
export interface RunRecordReader {
  /** The record of `runId` when `ownerId` owns it, else `undefined`. @throws `RunplaneError` (`STORE_FAILED`) for a corrupt hash */
  get(ownerId: string, runId: string): Promise<RunRecord | undefined>;
  /** The session's runs whose status is not terminal, oldest first. */
  listUnfinished(key: SessionKey): Promise<RunRecord[]>;
}

/** @internal Creates the run-record reads on `redis` under `keyPrefix`. */
export function createRunRecordReader(options: {
  readonly redis: Redis;
  readonly keyPrefix: string;
}): RunRecordReader {
  const { redis, keyPrefix } = options;
  return {
    async get(ownerId, runId) {
      const sessionId = await redis.hget(toOwnerKeys(ownerId, keyPrefix).runs, runId);
      if (sessionId === null) return undefined;
      const keys = toSessionKeys({ ownerId, sessionId }, keyPrefix);
      const record = toRunRecord(await redis.hgetall(keys.run(runId)));
      return record?.ownerId === ownerId ? record : undefined;
    },
    async listUnfinished(key) {
      const records = await readSessionRuns(redis, toSessionKeys(key, keyPrefix));
      return records.filter((record) => unfinished.has(record.status)).sort(byAge);
    },
  };
}

/** @internal Writes the owner's run index entries of `records`, all of one owner (idempotent). */
export async function indexRuns(
  redis: Redis,
  keyPrefix: string,
  records: ReadonlyArray<Pick<RunRecord, 'ownerId' | 'sessionId' | 'runId'>>,
): Promise<void> {
  if (records.length === 0) return;
  const owner = toOwnerKeys(records[0]!.ownerId, keyPrefix);
  await redis.hset(owner.runs, ...records.flatMap((record) => [record.runId, record.sessionId]));
}

/**
 * @internal Creates the holder's run records on `instance` (and adds their mirror to it).
 *
 * @remarks Same rules as the SQLite store: once a record holds a terminal status `setStatus`
 * no longer changes it; `finish` only fills in the outcome of a record whose status is
 * unfinished or the outcome's. Only sessions this instance holds are found.
 *
 * @returns the {@link RunRecords}: `create` throws {@link StaleFenceError} (`STALE_FENCE`) for a
 *   session not held here and `RunplaneError` (`STORE_FAILED`) for a run id that exists;
 *   `listUnfinished` lists the sessions held here
 */
export function createRedisRunRecords(instance: ClusterInstance): RunRecords {
  const { redis, keyPrefix } = instance;
  /** The records of each held session, by session key string, then run id. */
  const sessions = new Map<string, Map<string, RunRecord>>();
  /** Where each mirrored run lives. */
  const sessionOfRun = new Map<string, Map<string, RunRecord>>();

  instance.addMirror({
    async load(key, keys) {
      const records = await readSessionRuns(redis, keys);
      const runs = new Map(records.map((record) => [record.runId, record]));
      sessions.set(toSessionKeyString(key), runs);
      for (const runId of runs.keys()) sessionOfRun.set(runId, runs);
      await indexRuns(redis, keyPrefix, records);
    },
    forget(key) {
      const k = toSessionKeyString(key);
      for (const runId of sessions.get(k)?.keys() ?? []) sessionOfRun.delete(runId);
      sessions.delete(k);
    },
  });

  /** Replaces a mirrored record and queues the changed fields. */
  const change = (record: RunRecord, changes: Partial<RunRecord>) => {
    const key = { ownerId: record.ownerId, sessionId: record.sessionId };
    instance.write(key, { op: 'run.merge', runId: record.runId, fields: toFields(changes) });
    sessionOfRun.get(record.runId)?.set(record.runId, { ...record, ...changes });
  };

  const find = (runId: string) => sessionOfRun.get(runId)?.get(runId);

  return {
    create({ runId, ownerId, sessionId, input, at }) {
      const key = { ownerId, sessionId };
      const runs = sessions.get(toSessionKeyString(key));
      if (runs === undefined) throw new StaleFenceError(ownerId, sessionId, 0, 'not_held');
      if (sessionOfRun.has(runId)) {
        throw recordStoreFailed('run records create', `run ${runId} exists`);
      }
      const record: RunRecord = {
        runId,
        ownerId,
        sessionId,
        status: 'CREATED',
        input,
        createdAt: at,
        updatedAt: at,
        endedAt: undefined,
        outcome: undefined,
      };
      instance.write(key, { op: 'run.put', runId, fields: toFields(record) });
      runs.set(runId, record);
      sessionOfRun.set(runId, runs);
      instance.flushed(key).then(
        () => indexRuns(redis, keyPrefix, [record]).catch(() => undefined),
        () => undefined, // the session was lost: its next holder indexes the run
      );
    },

    setStatus(runId, status, at) {
      const record = find(runId);
      if (record === undefined || !unfinished.has(record.status)) return false;
      change(record, {
        status,
        updatedAt: at,
        endedAt: record.endedAt ?? (unfinished.has(status) ? undefined : at),
      });
      return true;
    },

    finish(runId, outcome, at) {
      const record = find(runId);
      if (record === undefined || record.outcome !== undefined) return false;
      const open = unfinished.has(record.status);
      if (!open && record.status !== outcome.status) return false;
      change(record, {
        status: open ? outcome.status : record.status,
        // As stored: JSON leaves out undefined fields, so the mirror equals what Redis reads.
        outcome: JSON.parse(JSON.stringify(outcome)) as RunRecordOutcome,
        updatedAt: at,
        endedAt: record.endedAt ?? at,
      });
      return true;
    },

    get(ownerId, runId) {
      const record = find(runId);
      return record?.ownerId === ownerId ? record : undefined;
    },

    listUnfinished() {
      const out: RunRecord[] = [];
      for (const runs of sessions.values()) {
        for (const record of runs.values()) if (unfinished.has(record.status)) out.push(record);
      }
      return out.sort(byAge);
    },
  };
}
