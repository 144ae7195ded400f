/**
 * The watch each cluster instance keeps (docs/architecture.md, "Cluster on Redis", "Failover"):
 * sessions with work are listed cluster-wide, so that a session whose holder died is taken by
 * another instance without waiting for a request to it; and sessions idle here are released, so
 * that an instance holds (and renews, and mirrors) only the sessions it drives.
 *
 * - **The live list** is a sorted set, `<prefix>live-sessions`, of `[ownerId, sessionId]` JSON:
 *   a session is added when an instance takes it, and again on every beat while it has work
 *   there (`ZADD NX`, one command per beat), and removed by the instance that releases it with
 *   no unfinished run. A holder that dies leaves its sessions listed. An unlisting races with
 *   the next holder's listing (its `ZADD` may land before the `ZREM`), so the releaser reads the
 *   lease after its `ZREM` and lists the session again when someone holds it by then: the new
 *   holder's `ZADD` came after its acquire, so either the releaser sees that lease or the `ZADD`
 *   lands after the `ZREM`. (One script over both keys would cross hash slots on Redis Cluster.)
 * - **The scan** reads a page of the list every beat and checks the pages' leases in one
 *   pipeline; a session with no lease is taken (`hold`: rebuilt from its records, so its
 *   running run is marked and its queue runs here). A page at a time bounds each beat; the
 *   cursor wraps, so a list of N sessions is read within N / page beats.
 * - **Idle release**: a held session with no run here (active, queued or unwinding), no loop, and
 *   no event for `idleReleaseMs` is released.
 *
 * @module
 * @internal
 */
import type { SessionKey } from '../events/event-log.js';
import type { Runtime } from '../runtime/runtime-types.js';
import type { Service } from '../server/service-app.js';
import type { RunRecords } from '../stores/run-records.js';
import type { ClusterInstance } from './cluster-instance.js';
import type { ClusterSessionAccess } from './cluster-session-access.js';
import { toSessionKeys } from './keys.js';
import { toDeletedSessionsKey } from './owner-keys.js';

/** @internal The running watch. */
export interface SessionWatch {
  /** Lists the session as having work (once per hold). */
  touched(key: SessionKey): void;
  /** Stops the beat and waits for the one in progress. */
  stop(): Promise<void>;
}

/** @internal Options of {@link startSessionWatch}. Times are ms of the instance's clock. */
export interface SessionWatchOptions {
  readonly cluster: ClusterInstance;
  readonly access: Pick<ClusterSessionAccess, 'hold'>;
  readonly runtime: Runtime;
  readonly service: () => Service;
  /** The holder's run records: a session released with unfinished runs stays listed. */
  readonly runs: RunRecords;
  readonly reportError: (error: unknown) => void;
  /** Time between beats (a third of the lease TTL, at most 1000, is a good choice). */
  readonly everyMs: number;
  /** Sessions read per beat. @default 256 */
  readonly pageSize?: number;
  /** How long a session with nothing running stays held here after its last event. @default 30000 */
  readonly idleReleaseMs?: number;
  /**
   * Called when the watch released a session that is deleted (listed for the purge): the purge
   * may go on now (it skips a session while anyone holds its lease). @default nothing
   */
  readonly onDeletedReleased?: () => void;
}

const memberOf = (key: SessionKey) => JSON.stringify([key.ownerId, key.sessionId]);

/** The key of the cluster's list of sessions with work, under `keyPrefix`. */
const toLiveSessionsKey = (keyPrefix: string) => `${keyPrefix}live-sessions`;

/** @internal Takes a session off the live list (its delete answered: nothing is left to take). */
export const unlistSession = (
  redis: ClusterInstance['redis'],
  keyPrefix: string,
  key: SessionKey,
) => redis.zrem(toLiveSessionsKey(keyPrefix), memberOf(key));

/**
 * @internal Unlists a session this instance released, unless another instance took it meanwhile
 * (its lease is in Redis after the `ZREM`: it is listed again; see the module's remarks).
 */
export async function unlistReleased(
  redis: ClusterInstance['redis'],
  keyPrefix: string,
  key: SessionKey,
): Promise<void> {
  const listKey = toLiveSessionsKey(keyPrefix);
  const member = memberOf(key);
  await redis.zrem(listKey, member);
  if ((await redis.exists(toSessionKeys(key, keyPrefix).lease)) === 1) {
    await redis.zadd(listKey, 'NX', Date.now(), member);
  }
}

const keyOf = (member: string): SessionKey | undefined => {
  try {
    const [ownerId, sessionId] = JSON.parse(member) as unknown[];
    if (typeof ownerId === 'string' && typeof sessionId === 'string') return { ownerId, sessionId };
  } catch {
    // not ours: dropped below
  }
  return undefined;
};

/** @internal Starts the watch of one instance. */
export function startSessionWatch(options: SessionWatchOptions): SessionWatch {
  const { cluster, runtime, reportError } = options;
  const { redis } = cluster;
  const listKey = toLiveSessionsKey(cluster.keyPrefix);
  const { everyMs } = options;
  const pageSize = options.pageSize ?? 256;
  const idleReleaseMs = options.idleReleaseMs ?? 30_000;
  const clock = cluster.clock;
  /** Held sessions listed under their current fence. */
  const listed = new Map<string, number>();
  const lastEvent = new Map<string, number>();
  let cursor = 0;
  let stopped = false;

  const stopEvents = runtime.onEvent((_event, key) => {
    lastEvent.set(memberOf(key), clock.now());
  });

  const touched = (key: SessionKey) => {
    const fence = cluster.fenceOf(key);
    const member = memberOf(key);
    lastEvent.set(member, clock.now());
    if (fence === undefined || listed.get(member) === fence) return;
    listed.set(member, fence);
    redis.zadd(listKey, 'NX', Date.now(), member).catch((error: unknown) => {
      // Not listed (Redis out of reach): the next beat lists it again (`releaseIdle`), or a
      // holder that dies later would leave the session to nobody.
      if (listed.get(member) === fence) listed.delete(member);
      reportError(error);
    });
  };

  /** Whether this instance has any work of the session in memory. */
  const busyHere = (key: SessionKey) => {
    const handle = runtime.session(key.ownerId, key.sessionId);
    if (handle.activeRunId !== undefined || handle.queuedRunIds.length > 0) return true;
    if (options.service().loopSessions.has(key)) return true;
    return runtime.pendingApprovals(key.ownerId, key.sessionId).length > 0;
  };

  /** Releases a session held here with nothing to do; unlists it when nothing is unfinished. */
  const release = async (key: SessionKey) => {
    const unfinished = options.runs
      .listUnfinished()
      .some((run) => run.ownerId === key.ownerId && run.sessionId === key.sessionId);
    const member = memberOf(key);
    listed.delete(member);
    lastEvent.delete(member);
    if (await cluster.release(key)) {
      if (!unfinished) await unlistReleased(redis, cluster.keyPrefix, key);
      // A deleted session taken to mark its runs (or taken as its delete was applied): its purge
      // was kicked while the lease was held here, so it would wait for the next sweep.
      if ((await redis.zscore(toDeletedSessionsKey(cluster.keyPrefix), member)) !== null) {
        options.onDeletedReleased?.();
      }
    }
  };

  const releaseIdle = async () => {
    const now = clock.now();
    const held = cluster.heldSessions();
    // Sessions lost meanwhile (their lease moved on): nothing of theirs is kept here.
    const heldMembers = new Set(held.map(memberOf));
    for (const member of [...listed.keys()]) if (!heldMembers.has(member)) listed.delete(member);
    for (const member of [...lastEvent.keys()]) {
      if (!heldMembers.has(member)) lastEvent.delete(member);
    }
    /** Sessions with work here: listed again (a no-op when listed), whatever unlisted them. */
    const busy: string[] = [];
    for (const key of held) {
      const member = memberOf(key);
      if (!listed.has(member)) touched(key);
      if (busyHere(key)) {
        lastEvent.set(member, now);
        busy.push(member);
        continue;
      }
      if (now - (lastEvent.get(member) ?? now) >= idleReleaseMs) await release(key);
    }
    if (busy.length > 0) {
      const score = Date.now();
      await redis.zadd(listKey, 'NX', ...busy.flatMap((member) => [score, member]));
    }
  };

  /** Takes the listed sessions of one page that nobody holds. */
  const scan = async () => {
    const members = await redis.zrange(listKey, cursor, cursor + pageSize - 1);
    cursor = members.length < pageSize ? 0 : cursor + pageSize;
    const candidates = members.flatMap((member) => {
      const key = keyOf(member);
      if (key === undefined) {
        void redis.zrem(listKey, member).catch(reportError);
        return [];
      }
      return cluster.fenceOf(key) === undefined ? [{ key, member }] : [];
    });
    if (candidates.length === 0) return;
    const pipeline = redis.pipeline();
    for (const { key } of candidates) {
      pipeline.exists(cluster.keysOf(key).lease).hexists(cluster.keysOf(key).meta, 'record');
    }
    const replies = (await pipeline.exec()) ?? [];
    for (const [index, { key, member }] of candidates.entries()) {
      const [error, leased] = replies[2 * index] ?? [null, 1];
      const [recordError, recorded] = replies[2 * index + 1] ?? [null, 1];
      if (error !== null || recordError !== null || leased !== 0 || stopped) continue;
      if (recorded === 0) {
        // Purged (or never created): taking it would write keys nobody purges again.
        await redis.zrem(listKey, member);
        continue;
      }
      try {
        if (!(await options.access.hold(key))) continue;
      } catch (holdError) {
        reportError(holdError);
        continue;
      }
      // Taken with nothing to drive: unlisted and given back at once.
      if (!busyHere(key)) await release(key);
    }
  };

  let beat: Promise<void> = Promise.resolve();
  let timer: unknown;
  const schedule = () => {
    if (stopped) return;
    timer = clock.setTimeout(() => {
      beat = (async () => {
        try {
          await releaseIdle();
          await scan();
        } catch (error) {
          reportError(error);
        }
      })().finally(schedule);
    }, everyMs);
  };
  schedule();

  return {
    touched,
    async stop() {
      stopped = true;
      clock.clearTimeout(timer);
      stopEvents();
      await beat;
    },
  };
}
