/**
 * The reads of a cluster's session access (docs/architecture.md, "Cluster on Redis"): every
 * instance answers for every session from Redis, exactly as the holder would, and a client sees
 * only what Redis holds.
 *
 * - `findSession`, `listSessions`: the session records and the owner index
 *   (`createSessionRecordReader`), newest first, cursor pages.
 * - `getRun`: the run record through the owner's run index (`createRunRecordReader`); while the
 *   run has not ended, its status is the live one: the runtime's when the session is held here,
 *   else the holder's live state in Redis (`live-state.ts`: `RUNNING` for the active run,
 *   `QUEUED` for a queued one). One `HGET` of a small field, rather than a scan of the log for
 *   the run's last `run.status`.
 * - `viewSession`: held here, the local access's (once this instance's queued writes are in
 *   Redis); else the record, the holder's live state and the Stream's last `seq`.
 * - `events`: the Redis event log (`read`, `follow` from the Stream on any instance; `lastSeq`
 *   the last `seq` Redis holds).
 * - `idempotencyKeys`: the owner's keys in Redis, shared by every instance.
 *
 * The owner's session and run indexes are written after the batch that carries the record
 * (another slot); {@link ClusterReads.indexAnswer} writes them again (idempotent) before a
 * command's answer goes out, so that a list or `getRun` on any instance after a 2xx finds what
 * it created.
 *
 * @module
 * @internal
 */
import type { Redis } from 'ioredis';
import type { SessionKey } from '../events/event-log.js';
import { traceCommand } from './command-trace.js';
import type {
  SessionAccess,
  SessionCommand,
  SessionCommandAnswers,
  SessionHolder,
} from '../server/session-access.js';
import { toSessionView } from '../server/session-view.js';
import type { SessionRecord } from '../stores/session-records.js';
import type { ClusterInstance } from './cluster-instance.js';
import { readLiveState, toLiveRunStatus } from './live-state.js';
import { createRedisIdempotencyKeys } from './redis-idempotency-keys.js';
import { createOwnerIndex } from './redis-owner-index.js';
import type { SessionKeys } from './keys.js';
import { createRunRecordReader, indexRuns, recordStoreFailed } from './redis-run-records.js';
import { addDeletedSessionFromRecord } from './redis-session-purge.js';
import { createSessionRecordReader } from './redis-session-records.js';

/** @internal The reads of a cluster's session access, and the index writes after a command. */
export interface ClusterReads extends Pick<
  SessionAccess,
  'findSession' | 'listSessions' | 'viewSession' | 'getRun' | 'events' | 'idempotencyKeys'
> {
  /**
   * Brings the owner's indexes in line with a command's answer (idempotent): the session a
   * create made, the runs a batch of events accepted; after a delete, the session (`deleted` is
   * its record as found before) leaves the index and its idempotency keys in Redis are forgotten.
   */
  indexAnswer(command: SessionCommand, answer: unknown, deleted?: SessionRecord): Promise<void>;
}

/**
 * The session's lease holder as Redis has it (`GET` and `PEXPIRETIME` of the lease, one
 * round trip), or `null` while nobody holds it.
 */
async function readHolder(redis: Redis, keys: SessionKeys): Promise<SessionHolder | null> {
  const replies =
    (await redis.pipeline().get(keys.lease).call('PEXPIRETIME', keys.lease).exec()) ?? [];
  const [[valueError, value] = [null, null], [expiryError, expiresAt] = [null, null]] =
    replies as Array<[Error | null, unknown]>;
  const error = valueError ?? expiryError;
  if (error !== null) throw recordStoreFailed('lease read', error.message, error);
  // Gone between the two (expired, released), or not a lease value: nobody holds it.
  if (typeof value !== 'string' || typeof expiresAt !== 'number' || expiresAt < 0) return null;
  const at = value.lastIndexOf(':');
  const fence = Number(value.slice(at + 1));
  if (at < 0 || !Number.isSafeInteger(fence)) return null;
  return { instance_id: value.slice(0, at), fence, lease_expires_at: expiresAt };
}

/**
 * @internal Creates the reads of `cluster`.
 *
 * @param local - the single-instance access over this instance's runtime (sessions held here)
 * @param defaultApprovalTimeoutMs - what a session without its own shows, in ms
 * @param rebuilt - whether this instance holds the session and has rebuilt it (its reads are
 *   then its runtime's; before, Redis's: the last holder's live state)
 */
export function createClusterReads(
  cluster: ClusterInstance,
  local: SessionAccess,
  defaultApprovalTimeoutMs: number,
  rebuilt: (key: SessionKey) => boolean = () => true,
): ClusterReads {
  const { redis, keyPrefix, eventLog } = cluster;
  const sessions = createSessionRecordReader({ redis, keyPrefix });
  const runs = createRunRecordReader({ redis, keyPrefix });
  const ownerIndex = createOwnerIndex(redis, keyPrefix);
  const idempotencyKeys = createRedisIdempotencyKeys({ redis, keyPrefix });

  const heldHere = (key: SessionKey) => cluster.fenceOf(key) !== undefined;
  /** On the holder: waits until its queued writes are in Redis (read your writes). */
  const settled = async (key: SessionKey) => {
    if (heldHere(key)) await cluster.flushed(key).catch(() => undefined);
  };
  /**
   * Whether this instance's own runtime answers for the session: it holds it and has rebuilt it
   * (a holder that just took a session is idle in memory until its rebuild requeued the runs;
   * meanwhile the last holder's live state in Redis is the truth), with its writes in Redis.
   */
  const answersHere = async (key: SessionKey) => {
    if (!heldHere(key) || !rebuilt(key)) return false;
    await settled(key);
    return heldHere(key);
  };

  return {
    async findSession(ownerId, sessionId) {
      traceCommand(`s:${sessionId}`, 'b.find_start');
      const found = await sessions.get(ownerId, sessionId);
      traceCommand(`s:${sessionId}`, 'b.find_end');
      return found;
    },
    listSessions: (ownerId, page) => sessions.list(ownerId, page),

    async viewSession(session) {
      const key = { ownerId: session.ownerId, sessionId: session.sessionId };
      const keys = cluster.keysOf(key);
      if (await answersHere(key)) {
        const [view, holder] = await Promise.all([
          local.viewSession(session),
          readHolder(redis, keys),
        ]);
        return { ...view, holder };
      }
      const [{ live, lastSeq }, holder] = await Promise.all([
        readLiveState(redis, keys),
        readHolder(redis, keys),
      ]);
      return { ...toSessionView(session, live, lastSeq, defaultApprovalTimeoutMs), holder };
    },

    async getRun(ownerId, runId) {
      const found = await runs.get(ownerId, runId);
      if (found === undefined) return undefined;
      const key = { ownerId, sessionId: found.sessionId };
      if (await answersHere(key)) return local.getRun(ownerId, runId);
      const [session, { live }] = await Promise.all([
        sessions.get(ownerId, found.sessionId),
        readLiveState(redis, cluster.keysOf(key)),
      ]);
      return session === undefined ? undefined : { ...found, status: toLiveRunStatus(found, live) };
    },

    events: {
      read: (ctx, key, options) => eventLog.read(ctx, key, options),
      follow: (ctx, key, options) => eventLog.follow(ctx, key, options),
      async lastSeq(_ctx, key) {
        await settled(key);
        return Number((await redis.get(cluster.keysOf(key).seq)) ?? 0);
      },
    },

    idempotencyKeys,

    async indexAnswer(command, answer, deleted) {
      const { ownerId, sessionId } = command;
      if (command.type === 'session.create') {
        const view = answer as SessionCommandAnswers['session.create'];
        await ownerIndex.add(ownerId, sessionId, view.created_at);
      } else if (command.type === 'session.apply_events') {
        const { results } = answer as SessionCommandAnswers['session.apply_events'];
        const runIds = results.flatMap((result) =>
          result.type === 'user.message' && typeof result.run_id === 'string'
            ? [result.run_id]
            : [],
        );
        await indexRuns(
          redis,
          keyPrefix,
          runIds.map((runId) => ({ ownerId, sessionId, runId })),
        );
      } else if (command.type === 'session.delete') {
        // Listed for the purge before the answer, so a sweep on any instance finds it.
        await addDeletedSessionFromRecord(redis, keyPrefix, { ownerId, sessionId });
        await Promise.all([
          deleted === undefined
            ? undefined
            : ownerIndex.remove(ownerId, sessionId, deleted.createdAt),
          idempotencyKeys.forgetSession(ownerId, sessionId),
        ]);
      }
    },
  };
}
