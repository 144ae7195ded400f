/**
 * `runplane serve --redis <url>`: the stores of one cluster instance on Redis, and the wiring
 * that makes the instance one of several sharing every session (docs/architecture.md, "Cluster
 * on Redis"; README "Cluster"). `serve.ts` builds the runtime and the service on these stores as
 * it does on SQLite, then hands them to {@link ServeCluster}.
 *
 * @module
 * @internal
 */
import { hostname } from 'node:os';
import { Redis } from 'ioredis';
import { InvalidArgumentError, RunplaneError, StaleFenceError } from '../errors.js';
import { toSessionKeyString, type SessionKey } from '../events/event-log.js';
import type { Runtime } from '../runtime/runtime-types.js';
import type { ClusterServeOptions } from '../server/serve-options.js';
import type { ServeStores } from '../server/serve-stores.js';
import type { Service } from '../server/service-app.js';
import type { SessionAccess } from '../server/session-access.js';
import type { StoreHealth } from '../server/store-health.js';
import { createMemoryIdempotencyKeys } from '../stores/idempotency-keys.js';
import type { Agent } from '../run/agent.js';
import { createClusterInstance, type ClusterInstance } from './cluster-instance.js';
import { createSafePointRecorder, defaultFailoverMaxAttempts } from './failover-resume.js';
import type { LiveStateSource } from './live-state.js';
import { createClusterSessionAccess, type ClusterSessionAccess } from './cluster-session-access.js';
import { createRedisCheckpointStore } from './redis-checkpoint-store.js';
import { getRedisDevToken } from './redis-dev-token.js';
import { createRedisHealth, isRedisUnavailable } from './redis-health.js';
import { createRedisInbox } from './redis-inbox.js';
import { createRedisRateBuckets, type ClusterRateBuckets } from './redis-rate-limit.js';
import { createRedisRunRecords } from './redis-run-records.js';
import { createRedisSessionPurge } from './redis-session-purge.js';
import { createRedisSessionRecords } from './redis-session-records.js';
import { createRedisSessionStore } from './redis-session-store.js';
import { startSessionWatch, type SessionWatch } from './session-watch.js';
import { checkRedisUrl, redactRedisUrl } from './redis-url.js';
import {
  abandonSession,
  createHandoffFilter,
  detachRun,
  rebuildSession,
  toHandoffAccess,
  type HandoffDeps,
} from './session-handoff.js';

/** @internal What `serve.ts` does with a cluster once the runtime and the service exist. */
export interface ServeCluster {
  readonly instance: ClusterInstance;
  /** The per-owner request buckets, shared by the instances. */
  rateBuckets(options: { perSecond: number; burst: number }): ClusterRateBuckets;
  /** The service's `sessionAccess`: the cluster's access around the local one. */
  sessionAccess(
    local: SessionAccess,
    deps: {
      readonly runtime: Runtime;
      readonly service: () => Service;
      readonly maxSessionsPerOwner: number | undefined;
      readonly defaultApprovalTimeoutMs: number | undefined;
      /** Called once a deleted session's lease is released: the purge may go on. */
      readonly onDeletedReleased: () => void;
    },
  ): SessionAccess;
  /**
   * The service's agent, wrapped so that the runs of `resume` sessions record their safe points
   * (`failover-resume.ts`).
   */
  recordingAgent<TInput, TOutput>(agent: Agent<TInput, TOutput>): Agent<TInput, TOutput>;
  /** Whether Redis can be reached (`ServiceOptions.storeHealth`: 503 `store_unavailable`). */
  readonly storeHealth: StoreHealth;
  /** Starts watching for sessions left without a holder, and releasing idle ones. */
  start(): void;
  /**
   * Hands this instance's sessions to the others: no lease is taken from now on; each held
   * session's waiting runs are detached (they stay waiting in Redis for the next holder), and
   * sessions with nothing running are released at once. In a `resume` session the running run
   * is cut at its next safe point (within `graceMs`), left RUNNING for the next holder, and the
   * session released.
   */
  drain(options?: { graceMs?: number }): Promise<void>;
  /** Releases every lease still held (after the runtime's shutdown), then closes the access. */
  close(): Promise<void>;
}

/**
 * The runtime as the live state reads it, the runs a drain handed on still queued (after the
 * runtime's own, which a drain no longer starts).
 */
function withHandedOffRuns(
  runtime: Runtime,
  handedOff: ReadonlyMap<string, string[]>,
): LiveStateSource {
  return {
    onEvent: (listener) => runtime.onEvent(listener),
    pendingApprovals: (ownerId, sessionId) => runtime.pendingApprovals(ownerId, sessionId),
    session(ownerId, sessionId) {
      const handle = runtime.session(ownerId, sessionId);
      const handed = handedOff.get(toSessionKeyString({ ownerId, sessionId }));
      if (handed === undefined) return handle;
      return {
        ownerId,
        sessionId,
        get activeRunId() {
          return handle.activeRunId;
        },
        get queuedRunIds() {
          return [...handle.queuedRunIds, ...handed];
        },
        get busy() {
          return true;
        },
        interrupt: (message) => handle.interrupt(message),
        cancelAll: (cancelOptions) => handle.cancelAll(cancelOptions),
        onIdle: () => handle.onIdle(),
      };
    },
  };
}

const connectTimeoutMs = 5_000;
/** Reconnect attempts a command waits through before it fails (`MaxRetriesPerRequestError`). */
const maxRetriesPerRequest = 3;
/** The longest wait between two reconnect attempts, in ms. */
const maxReconnectDelayMs = 500;
/**
 * How long one Redis command may wait for its answer, in ms, before it fails
 * (`Command timed out`: 503 `store_unavailable` for a request). A frozen Redis (`SIGSTOP`, a
 * stalled host) keeps its TCP connections open and answers nothing: without this bound a
 * request, and a shutdown, waited until Redis answered again (README "Cluster").
 */
const redisCommandTimeoutMs = 2_000;

/** Connects to `url`, or throws `STORE_FAILED` naming it (the connection is closed again). */
async function connect(url: string): Promise<Redis> {
  checkRedisUrl(url);
  // A command fails after a few reconnect attempts, not ioredis's 20 (about 10 s), and a
  // reconnect waits at most `maxReconnectDelayMs` (ioredis's default backoff grows to 2 s, so
  // deep in an outage a request took up to 8 s to fail): a request then answers 503
  // `store_unavailable` within about 2 s while Redis is down, and the background writers
  // (shipper, renew, watch) retry on their own beats.
  const redis = new Redis(url, {
    lazyConnect: true,
    connectTimeout: connectTimeoutMs,
    maxRetriesPerRequest: maxRetriesPerRequest,
    // No command of the cluster blocks in Redis (no BLPOP, no XREAD BLOCK; pub/sub listens
    // without a pending command), so one bound fits every command; `duplicate()` copies it to
    // the subscriber connections, whose failed SUBSCRIBE is tried again (redis-subscriber.ts).
    commandTimeout: redisCommandTimeoutMs,
    retryStrategy: (attempt) => Math.min(attempt * 50, maxReconnectDelayMs),
  });
  redis.on('error', () => undefined); // ioredis reconnects; leases and batches handle the gap
  try {
    await redis.connect();
    await redis.ping();
    // ioredis goes on in db 0 when its SELECT of the URL's db fails (a db out of range): the
    // instance would then share another cluster's keys without a word.
    const db = new URL(url).pathname.slice(1) || '0';
    const info = String(await redis.call('CLIENT', 'INFO'));
    if (!new RegExp(`(^| )db=${db}( |$)`).test(info)) {
      throw new Error(`db ${db} is not available (out of range, or not a number)`);
    }
  } catch (error) {
    redis.disconnect();
    throw new RunplaneError(
      'STORE_FAILED',
      `cannot reach Redis at ${redactRedisUrl(url)}: ${(error as Error).message}`,
      { cause: error },
    );
  }
  return redis;
}

/**
 * @internal Connects to Redis and builds the stores of one cluster instance.
 *
 * @throws `RunplaneError` (`STORE_FAILED`) when Redis cannot be reached
 * @throws `InvalidArgumentError` (`INVALID_ARGUMENT`) for a bad lease TTL, id, prefix or
 *   `failoverMaxAttempts`
 */
export async function openRedisServeStores(
  options: ClusterServeOptions & {
    readonly reportError: (error: unknown) => void;
    readonly log: (line: string) => void;
  },
): Promise<ServeStores & { readonly cluster: ServeCluster }> {
  const failoverMaxAttempts = options.failoverMaxAttempts ?? defaultFailoverMaxAttempts;
  if (!(
    Number.isInteger(failoverMaxAttempts) &&
    failoverMaxAttempts >= 1 &&
    failoverMaxAttempts <= 100
  )) {
    throw new InvalidArgumentError(
      'failoverMaxAttempts',
      `expected \`failoverMaxAttempts\` to be an integer from 1 to 100, got ${String(failoverMaxAttempts)}`,
    );
  }
  const redis = await connect(options.url);
  const instanceId = options.instanceId ?? `${hostname()}-${process.pid}`;
  let deps: HandoffDeps | undefined;
  let instance: ClusterInstance;
  try {
    instance = createClusterInstance({
      redis,
      instanceId,
      leaseTtlMs: options.leaseTtlMs,
      keyPrefix: options.keyPrefix,
      onLost: (key, error) => {
        options.log(
          `runplane serve: lost session ${key.ownerId}/${key.sessionId} (${error.message}); its work here stopped`,
        );
        if (deps !== undefined) abandonSession(deps, key).catch(options.reportError);
      },
    });
  } catch (error) {
    redis.disconnect();
    throw error;
  }
  const cluster = instance;
  const runs = createRedisRunRecords(cluster);
  const sessions = createRedisSessionRecords(cluster);
  const filter = createHandoffFilter(cluster.eventLog, runs);
  const recorder = createSafePointRecorder({
    cluster,
    sessions,
    log: options.log,
    cutRun(key, runId) {
      if (deps === undefined) return;
      detachRun(deps, key, runId);
      deps.runtime.runs.cancel(key.ownerId, key.sessionId, runId, {
        reason: 'drain: resumed on another instance',
      });
    },
  });
  const checkpoints = createRedisCheckpointStore({
    redis,
    keyPrefix: cluster.keyPrefix,
    instance: cluster,
  });
  let access: ClusterSessionAccess | undefined;
  /** A draining instance's sessions: the runs it handed on unstarted, in their order. */
  const handedOff = new Map<string, string[]>();
  let watch: SessionWatch | undefined;
  /** Kicks the purge of deleted sessions (the service's data sweep), once the access is built. */
  let kickPurge: (() => void) | undefined;
  let closed = false;
  /**
   * A drain's release that Redis did not take: with Redis out of reach (frozen, say) the lease
   * simply expires and another instance takes the session then (README "Cluster").
   */
  const releaseFailed = (key: SessionKey) => (error: unknown) => {
    if (!isRedisUnavailable(error)) {
      options.reportError(error);
      return;
    }
    options.log(
      `runplane serve: could not release session ${key.ownerId}/${key.sessionId} (Redis: ${(error as Error).message}); its lease expires within ${options.leaseTtlMs ?? 10_000} ms, then another instance takes it`,
    );
  };

  const serveCluster: ServeCluster = {
    instance: cluster,
    storeHealth: createRedisHealth(redis, cluster.clock),
    rateBuckets: (limits) =>
      createRedisRateBuckets({ ...limits, redis, keyPrefix: cluster.keyPrefix }),
    sessionAccess(
      local,
      { runtime, service, maxSessionsPerOwner, defaultApprovalTimeoutMs, onDeletedReleased },
    ) {
      const handoff: HandoffDeps = {
        cluster,
        runtime,
        service,
        runs,
        sessions,
        filter,
        failoverMaxAttempts,
      };
      deps = handoff;
      kickPurge = onDeletedReleased;
      const recording = toHandoffAccess(local, cluster, runs, runtime.clock, onDeletedReleased);
      access = createClusterSessionAccess({
        cluster,
        local: recording,
        runtime: withHandedOffRuns(runtime, handedOff),
        maxSessionsPerOwner,
        defaultApprovalTimeoutMs,
        reportError: options.reportError,
        onAcquired: async (key: SessionKey) => {
          const report = await rebuildSession(handoff, key);
          const { marked, requeued, resumed } = report;
          if (marked.length > 0 || requeued.length > 0 || resumed.length > 0) {
            options.log(
              `runplane serve: took session ${key.ownerId}/${key.sessionId}: ${marked.length} run(s) marked, ${resumed.length} resumed, ${requeued.length} requeued`,
            );
          }
          watch?.touched(key);
        },
      });
      return access;
    },
    recordingAgent: (agent) => recorder.wrap(agent),
    start() {
      if (access === undefined || deps === undefined) return;
      watch = startSessionWatch({
        cluster,
        access,
        runtime: deps.runtime,
        service: deps.service,
        runs,
        reportError: options.reportError,
        everyMs: Math.min(1_000, Math.max(10, Math.floor((options.leaseTtlMs ?? 10_000) / 3))),
        onDeletedReleased: kickPurge,
      });
    },
    async drain(drainOptions = {}) {
      access?.drain();
      await watch?.stop();
      watch = undefined;
      if (deps === undefined) return;
      const { runtime } = deps;
      // Past the grace, a run not yet cut ends as in `mark` (the runtime's shutdown).
      const grace = AbortSignal.timeout(Math.max(1, drainOptions.graceMs ?? 10_000));
      await Promise.all(
        cluster.heldSessions().map(async (key) => {
          const handle = runtime.session(key.ownerId, key.sessionId);
          // Handed on unstarted: the live state keeps naming them queued until the next
          // holder writes its own (a reader never sees the session idle meanwhile).
          handedOff.set(toSessionKeyString(key), [...handle.queuedRunIds]);
          for (const runId of handle.queuedRunIds) detachRun(deps!, key, runId);
          handle.cancelAll();
          const active = handle.activeRunId;
          if (active === undefined && !deps!.service().loopSessions.has(key)) {
            await cluster.release(key).catch(releaseFailed(key));
            return;
          }
          const run =
            active === undefined
              ? undefined
              : runtime.runs.find(key.ownerId, key.sessionId, active);
          if (run === undefined || runs.get(key.ownerId, run.id) === undefined) return;
          const ended = run.termination.catch(() => undefined);
          if (await recorder.cut(key, run.id, ended, grace)) {
            // Cut and detached: it settles writing nothing; its state and RUNNING are in Redis.
            await ended;
            await cluster.release(key).catch(releaseFailed(key));
          }
        }),
      );
    },
    async close() {
      if (closed) return;
      closed = true;
      await watch?.stop();
      await Promise.all(
        cluster.heldSessions().map((key) => cluster.release(key).catch(() => false)),
      );
      await access?.close();
      await cluster.close();
      await redis.quit().catch(() => redis.disconnect());
    },
  };

  return {
    banner: `cluster instance ${instanceId} on ${redactRedisUrl(options.url)} (lease ttl ${options.leaseTtlMs ?? 10_000} ms)`,
    eventLog: Object.assign(filter.eventLog, { forget: () => undefined }),
    sessionStore: createRedisSessionStore(cluster),
    inbox: createRedisInbox(cluster),
    sessions,
    runs: filter.runs,
    // The cluster's access keeps idempotency keys in Redis; the local access's are never read.
    idempotencyKeys: createMemoryIdempotencyKeys(),
    checkpoints,
    devToken: () => getRedisDevToken({ redis, keyPrefix: cluster.keyPrefix }),
    createPurge: (onPurged) =>
      createRedisSessionPurge({ redis, keyPrefix: cluster.keyPrefix, onPurged }),
    cluster: serveCluster,
    close: () => serveCluster.close(),
  };
}

/** @internal Whether `error` is a write refused because this instance no longer drives the session. */
export function isHandedOff(error: unknown): boolean {
  if (error instanceof StaleFenceError) return true;
  return error instanceof RunplaneError && error.cause instanceof StaleFenceError;
}
