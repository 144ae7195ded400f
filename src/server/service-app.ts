/**
 * The HTTP service as a web-standard fetch handler (a Hono app): sessions as event logs with
 * cursors and SSE, user events in batches, Bearer auth (AgentScope Service's session events
 * API). This module only composes: middleware under `middleware/` (auth, body limits, JSON-only
 * bodies, the stream quota), routes under `routes/` (sessions, events, stream, runs, inspect),
 * which reach sessions only through a `SessionAccess` (`session-access.ts`: commands and
 * reads), and the rules behind it in `session-commands.ts` and `session-events.ts`, which know
 * nothing of HTTP.
 *
 * @module
 */
import { Hono } from 'hono';
import { z } from 'zod';
import { parseOptions } from '../validation.js';
import type { Agent } from '../run/agent.js';
import type { Runtime } from '../runtime/create-runtime.js';
import type { RunRecord, RunRecords } from '../stores/run-records.js';
import type { AgentRun } from '../run/agent-run.js';
import { createMemoryIdempotencyKeys, type IdempotencyKeys } from '../stores/idempotency-keys.js';
import type { SessionRecord, SessionRecords } from '../stores/session-records.js';
import type { Authenticate } from './auth.js';
import { chatPageHtml } from './chat-page.js';
import { pageSecurityPolicy, securityHeaders } from './middleware/security-headers.js';
import { HttpError, toHttpError } from './http-error.js';
import { bearerAuth } from './middleware/bearer-auth.js';
import { bodyReadDeadline, bodySizeLimit } from './middleware/body-limits.js';
import { idempotency } from './middleware/idempotency.js';
import { rateLimit, type RateLimitOptions, type SharedBuckets } from './middleware/rate-limit.js';
import { watchApprovalTimeouts } from './approval-timeouts.js';
import { createStreamRegistry } from './middleware/stream-quota.js';
import { createLoopSessions, type LoopSessions } from './loop-sessions.js';
import { createLocalSessionAccess } from './local-session-access.js';
import type { SessionAccess } from './session-access.js';
import { storeRetryAfterSeconds, type StoreHealth } from './store-health.js';
import type { CheckpointStore } from '../stores/checkpoint-store.js';
import { eventRoutes } from './routes/events.js';
import { inspectPageRoutes, inspectStreamRoutes } from './routes/inspect.js';
import { runRoutes } from './routes/runs.js';
import { sessionRoutes } from './routes/sessions.js';
import { streamRoutes } from './routes/stream.js';
import type { TimelineHub } from '../inspect/timeline-hub.js';

export { toRecordOutcome } from './session-events.js';
import { OwnerRunCount, requeueRun } from './session-events.js';

/** Options of {@link createServiceApp}. */
export interface ServiceOptions {
  /** The runtime every run lives in; its event log is what the API reads. */
  readonly runtime: Runtime;
  /**
   * The agent each `user.message` runs, with the message text as input. In a loop session a
   * turn's input is its messages joined by a blank line, and a turn resumed after a restart gets
   * `{ resume: state }` (what it passed to its last `ctx.safePoint`; the ReAct agent's form).
   */
  readonly agent: Agent<string, unknown>;
  /**
   * Where loop sessions checkpoint their TurnLoop on shutdown (`runplane serve`: SQLite).
   * @default none (a loop session's state does not outlive the process; its log still does)
   */
  readonly checkpointStore?: CheckpointStore;
  /** How long a loop session's TurnLoop with nothing to do stays in memory, in ms. @default 60000 */
  readonly loopIdleMs?: number;
  /** Where sessions (owner, strategy) are kept. */
  readonly sessions: SessionRecords;
  /** Where runs (status, outcome) are kept. */
  readonly runs: RunRecords;
  /** Maps a Bearer token to its owner. */
  readonly authenticate: Authenticate;
  /** Interval of SSE heartbeat comments, in ms (on the runtime clock). @default 15000 */
  readonly heartbeatMs?: number;
  /** Unread bytes one SSE stream may buffer before its reader counts as behind (`sse.ts`). @default 262144 */
  readonly streamBufferBytes?: number;
  /** The largest request body, in bytes; bigger is 413. @default 1048576 (1 MiB) */
  readonly maxBodyBytes?: number;
  /**
   * How long a request body may take to arrive once its headers are in, in ms (wall clock);
   * later is 408 `request_timeout` and the connection is closed. @default 30000
   */
  readonly bodyTimeoutMs?: number;
  /**
   * Open SSE streams one owner may hold at once (session and inspect streams together); one
   * more is 429 `too_many_streams`. Bounds what one client replaying a long log many times
   * over can take from everyone else. @default 128
   */
  readonly maxStreamsPerOwner?: number;
  /** Hints (`user.supplement`) that may wait in one session; one more is 429 `too_many_hints`. @default 100 */
  readonly maxPendingHints?: number;
  /**
   * Runs of one owner not yet ended (running or waiting, across its sessions); one more
   * `user.message` is 429 `too_many_runs`. @default 1000
   */
  readonly maxUnfinishedRunsPerOwner?: number;
  /** Total budget of each run, queue time included, in ms. @default none */
  readonly runTimeoutMs?: number;
  /** `grace_ms` of a new session that names none, in ms. @default 5000 */
  readonly defaultGraceMs?: number;
  /**
   * Where `Idempotency-Key` answers are kept (24 h); `runplane serve` keeps them in SQLite.
   * @default an in-memory store (keys do not outlive the process)
   */
  readonly idempotencyKeys?: IdempotencyKeys;
  /**
   * Idempotency keys one owner may hold (24 h each); one more is 429
   * `too_many_idempotency_keys`. @default 10000
   */
  readonly maxIdempotencyKeysPerOwner?: number;
  /** Sessions one owner may have at once; one more is 429 `too_many_sessions`. @default 10000 */
  readonly maxSessionsPerOwner?: number;
  /**
   * Requests per owner: `perSecond` sustained, `burst` at once; past it 429 `rate_limited` with
   * `Retry-After`. @default none (`runplane serve` sets 50 per second, bursts of 200)
   */
  readonly rateLimit?: RateLimitOptions | undefined;
  /** Where the rate limit's buckets are kept when not in this process (a cluster's, in Redis). */
  readonly rateBuckets?: SharedBuckets | undefined;
  /**
   * The reachability of a shared store (a cluster's Redis): a request failing because it cannot
   * be reached is 503 `store_unavailable` with `Retry-After` (not 500 `internal`), and `GET
   * /healthz` asks it. @default none (stores in this process: always reachable)
   */
  readonly storeHealth?: StoreHealth | undefined;
  /**
   * How long a tool call waits for its confirmation before it is denied with reason `timeout`,
   * in ms, for a session that sets no `approval_timeout_ms`. @default 600000 (10 minutes)
   */
  readonly approvalTimeoutMs?: number;
  /**
   * Called once a deleted session's runs have settled: its data can be removed (`runplane
   * serve` kicks its sweep, `data-sweeper.ts`). @default nothing (the records stay marked)
   */
  readonly onSessionDeleted?: (key: { ownerId: string; sessionId: string }) => void;
  /** Receives unexpected errors (answered as 500 `internal`). @default console.error */
  readonly reportError?: (error: unknown) => void;
  /**
   * How routes reach sessions: given this process's access (runtime and stores, see
   * `local-session-access.ts`), returns the one the routes use. A cluster wraps it to route
   * commands to each session's lease holder and to read from Redis (docs/architecture.md,
   * "Cluster on Redis"); `session-access.ts` says which calls are commands and which are reads.
   * @default the local access itself
   */
  readonly sessionAccess?: (local: SessionAccess) => SessionAccess;
  /**
   * The live lifecycle timeline: when given (its `inspect` handed to the runtime), `GET /inspect`
   * serves the timeline viewer and `GET /api/inspect/stream` streams the caller's transitions.
   */
  readonly timeline?: TimelineHub;
}

/** The service: the app and its lifecycle controls. */
export interface Service {
  /** The Hono app (`app.request(...)` in tests). */
  readonly app: Hono<{ Variables: { ownerId: string } }>;
  /** The web-standard handler: `fetch(request) → response`. */
  readonly fetch: (request: Request) => Response | Promise<Response>;
  /** Whether new work is refused (503) because the service is shutting down. */
  readonly draining: boolean;
  /** How many SSE streams are open. */
  readonly openStreams: number;
  /** Starts refusing new work: new sessions and `user.message` get 503 `shutting_down`. */
  drain(): void;
  /** Ends every open SSE stream (each client sees a clean end of stream). */
  closeStreams(): void;
  /**
   * Whether a deleted session's runs are still settling (its data must not be removed yet).
   */
  isSettling(key: { ownerId: string; sessionId: string }): boolean;
  /** The TurnLoops of loop sessions: `runplane serve` resumes them on start, stops them at shutdown. */
  readonly loopSessions: LoopSessions;
  /**
   * @internal Puts a run another process recorded as waiting back in its session's queue (a
   * cluster's new lease holder; see `requeueRun` in session-events.ts).
   */
  requeueRun(
    session: SessionRecord,
    record: Pick<RunRecord, 'runId' | 'input' | 'createdAt'>,
    /** What the agent gets instead of `record.input` (a failover resume's `{ resume: state }`). */
    input?: unknown,
  ): AgentRun<unknown>;
  /** Stops the approval timers (at shutdown). */
  close(): void;
}

/** How long an `Idempotency-Key` and its first answer are kept, in ms (24 h). */
const idempotencyKeyTtlMs = 24 * 3_600_000;
/** The chat page's Content-Security-Policy (its inline script and style by hash). */
const chatPagePolicy = pageSecurityPolicy(chatPageHtml);
/** How long a key claimed by a request of another (or a dead) process stays claimed, in ms. */
const idempotencyLockMs = 30_000;

/** `Retry-After` of a 503 `shutting_down`, in seconds. */
const shutdownRetryAfterSeconds = 5;

/**
 * `Retry-After` of a 504 `command_timeout` (a cluster's holder did not answer), in seconds: the
 * wait outlasted a lease TTL, so a dead holder's session has moved by then; the client reads the
 * session before it retries, since the command may still be applied (README "Cluster").
 */
const commandTimeoutRetryAfterSeconds = 2;

/**
 * `Retry-After` of a 503 `session_moved` (a cluster's session changed holder while the request
 * was applied), in seconds: the new holder already has it; the client reads the session before
 * it retries, since the outcome is unknown (README "Cluster").
 */
const sessionMovedRetryAfterSeconds = 1;

const positiveInt = z
  .number({ error: 'a positive integer' })
  .int({ error: 'a positive integer' })
  .positive({ error: 'a positive integer' });

const serviceOptionsSchema = z.object({
  authenticate: z.custom<Authenticate>((value) => typeof value === 'function', {
    error: 'a function of a token to an owner',
  }),
  heartbeatMs: positiveInt.optional(),
  streamBufferBytes: positiveInt.optional(),
  maxBodyBytes: positiveInt.optional(),
  bodyTimeoutMs: positiveInt.optional(),
  maxStreamsPerOwner: positiveInt.optional(),
  maxPendingHints: positiveInt.optional(),
  maxUnfinishedRunsPerOwner: positiveInt.optional(),
  maxIdempotencyKeysPerOwner: positiveInt.optional(),
  runTimeoutMs: positiveInt.optional(),
  maxSessionsPerOwner: positiveInt.optional(),
  rateLimit: z.strictObject({ perSecond: positiveInt, burst: positiveInt }).optional(),
  rateBuckets: z
    .custom<SharedBuckets>((value) => typeof (value as SharedBuckets | null)?.take === 'function', {
      error: 'an object with take(ownerId)',
    })
    .optional(),
  storeHealth: z
    .custom<StoreHealth>(
      (value) =>
        typeof (value as StoreHealth | null)?.isUnavailable === 'function' &&
        typeof (value as StoreHealth | null)?.check === 'function',
      { error: 'an object with isUnavailable(error) and check()' },
    )
    .optional(),
  approvalTimeoutMs: positiveInt.optional(),
  loopIdleMs: positiveInt.optional(),
  sessionAccess: z
    .custom<(local: SessionAccess) => SessionAccess>((value) => typeof value === 'function', {
      error: 'a function of the local session access to the one routes use',
    })
    .optional(),
  defaultGraceMs: z
    .number({ error: 'a non-negative integer' })
    .int({ error: 'a non-negative integer' })
    .nonnegative({ error: 'a non-negative integer' })
    .optional(),
});

/**
 * Creates the HTTP service.
 *
 * @remarks Routes (every `/api` route needs `Authorization: Bearer <token>`; the stream also
 * takes `?access_token=` because `EventSource` cannot send headers):
 * - `GET /` the chat page; `GET /healthz` liveness (503 while draining).
 * - `POST /api/sessions` `{ mode?, strategy?, grace_ms? }` → 201 session (`mode: "loop"`: a
 *   TurnLoop runs its messages, see `loop-sessions.ts`); `GET` / `PATCH
 *   /api/sessions/:id` → the session with its status, active run and queued runs.
 * - `POST /api/sessions/:id/events` `{ events: [...] }` → `{ results: [...] }`, one per event;
 *   the whole batch is validated before any event is applied.
 * - `GET /api/sessions/:id/events?after&limit&types`; `GET .../events/stream?after&types` (SSE,
 *   resuming from max(after, Last-Event-ID)).
 * - `GET /api/runs/:id` → the run's record.
 *
 * Errors are `{ error: { code, message } }`; someone else's session or run is 404, exactly
 * like one that does not exist. A run is recorded when it is created and again with its
 * outcome once it has settled (one write each); in between, its status is the live one.
 *
 * @param options - {@link ServiceOptions}
 * @returns the {@link Service}
 * @throws {@link InvalidArgumentError} (`INVALID_ARGUMENT`) for a bad option, e.g. a
 *   `heartbeatMs` that is not a positive integer
 * @example
 * ```ts
 * const service = createServiceApp({ runtime, agent, sessions, runs, authenticate });
 * const res = await service.app.request('/healthz');
 * ```
 */
export function createServiceApp(options: ServiceOptions): Service {
  parseOptions(serviceOptionsSchema, options, 'options');
  const { runtime, agent, sessions, runs, authenticate } = options;
  const heartbeatMs = options.heartbeatMs ?? 15_000;
  const maxBodyBytes = options.maxBodyBytes ?? 1024 * 1024;
  const bodyTimeoutMs = options.bodyTimeoutMs ?? 30_000;
  const defaultGraceMs = options.defaultGraceMs ?? 5_000;
  const maxStreamsPerOwner = options.maxStreamsPerOwner ?? 128;
  const maxPendingHints = options.maxPendingHints ?? 100;
  const reportError =
    options.reportError ?? ((error: unknown) => console.error('[runplane serve]', error));
  const streams = createStreamRegistry(maxStreamsPerOwner);
  let draining = false;
  const isDraining = () => draining;
  const approvalTimeoutMs = options.approvalTimeoutMs ?? 600_000;
  const stopApprovalTimeouts = watchApprovalTimeouts({
    runtime,
    sessions,
    defaultTimeoutMs: approvalTimeoutMs,
  });
  const loopSessions = createLoopSessions({
    runtime,
    agent,
    runs,
    sessions,
    store: options.checkpointStore,
    idleMs: options.loopIdleMs,
    reportError,
  });
  /** Deleted sessions whose runs are settling, as JSON `[ownerId, sessionId]`. */
  const settling = new Set<string>();
  const localOptions = {
    runtime,
    agent,
    runs,
    sessions,
    idempotencyKeys: options.idempotencyKeys ?? createMemoryIdempotencyKeys(),
    defaultGraceMs,
    maxSessionsPerOwner: options.maxSessionsPerOwner ?? 10_000,
    defaultApprovalTimeoutMs: approvalTimeoutMs,
    onSessionDeleted: options.onSessionDeleted ?? (() => {}),
    settling,
    loopSessions,
    maxPendingHints,
    unfinishedRuns: new OwnerRunCount(options.maxUnfinishedRunsPerOwner ?? 1_000),
    runTimeoutMs: options.runTimeoutMs,
    isDraining,
    reportError,
  };
  const local = createLocalSessionAccess(localOptions);
  const access = options.sessionAccess?.(local) ?? local;
  const idempotent = idempotency({
    store: access.idempotencyKeys,
    clock: runtime.clock,
    ttlMs: idempotencyKeyTtlMs,
    lockMs: idempotencyLockMs,
    maxKeysPerOwner: options.maxIdempotencyKeysPerOwner ?? 10_000,
  });

  const app = new Hono<{ Variables: { ownerId: string } }>();

  app.onError((error, c) => {
    const httpError =
      !(error instanceof HttpError) && options.storeHealth?.isUnavailable(error) === true
        ? new HttpError('store_unavailable', 'the shared store cannot be reached now; retry later')
        : toHttpError(error);
    if (httpError.code === 'store_unavailable') {
      c.header('Retry-After', String(storeRetryAfterSeconds));
    }
    if (httpError.code === 'command_timeout') {
      c.header('Retry-After', String(commandTimeoutRetryAfterSeconds));
    }
    if (httpError.code === 'session_moved') {
      c.header('Retry-After', String(sessionMovedRetryAfterSeconds));
    }
    if (httpError.code === 'internal' || httpError.code === 'store_failed') reportError(error);
    if (httpError.code === 'shutting_down') {
      // The service is going away: the client retries later, on a new connection.
      c.header('Retry-After', String(shutdownRetryAfterSeconds));
      c.header('Connection', 'close');
    }
    return c.json(httpError.toBody(), httpError.status as 400);
  });
  // A path the service knows, asked with a method it does not answer there, is 405 with Allow.
  const routePatterns = new Map<string, RegExp>();
  const allowedMethods = (path: string): string[] => {
    const methods = new Set<string>();
    for (const route of app.routes) {
      if (route.method === 'ALL') continue; // middleware
      let pattern = routePatterns.get(route.path);
      if (pattern === undefined) {
        const source = route.path
          .split('/')
          .map((part) =>
            part.startsWith(':') ? '[^/]+' : part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'),
          )
          .join('/');
        pattern = new RegExp(`^${source}$`);
        routePatterns.set(route.path, pattern);
      }
      if (pattern.test(path)) methods.add(route.method);
    }
    return [...methods];
  };
  app.notFound((c) => {
    const allow = allowedMethods(c.req.path);
    if (allow.length > 0) {
      const error = new HttpError(
        'method_not_allowed',
        `expected one of ${allow.join(', ')} for ${c.req.path}, got ${c.req.method}`,
      );
      return c.json(error.toBody(), 405, { allow: allow.join(', ') });
    }
    return c.json(
      new HttpError('not_found', `no route for ${c.req.method} ${c.req.path}`).toBody(),
      404,
    );
  });

  app.use(securityHeaders());
  app.use(bodyReadDeadline(bodyTimeoutMs));
  app.get('/', (c) => c.html(chatPageHtml, 200, { 'content-security-policy': chatPagePolicy }));
  // The page holds no data; the stream is owner-scoped and behind the /api auth below.
  if (options.timeline !== undefined) app.route('/', inspectPageRoutes());
  app.get('/healthz', async (c) => {
    if (draining) {
      return c.json(
        {
          status: 'draining',
          ...new HttpError('shutting_down', 'the service is shutting down').toBody(),
        },
        503,
      );
    }
    const problem = await options.storeHealth?.check();
    if (problem !== undefined) {
      return c.json(
        { status: 'store_unavailable', ...new HttpError('store_unavailable', problem).toBody() },
        503,
        { 'retry-after': String(storeRetryAfterSeconds) },
      );
    }
    return c.json({ status: 'ok' });
  });

  app.use('/api/*', bearerAuth(authenticate));
  if (options.rateLimit !== undefined)
    app.use('/api/*', rateLimit(options.rateLimit, runtime.clock, options.rateBuckets));
  app.use('/api/*', bodySizeLimit(maxBodyBytes));

  app.route('/', sessionRoutes({ access, isDraining, idempotent }));
  app.route('/', eventRoutes({ access, idempotent }));
  app.route(
    '/',
    streamRoutes({
      access,
      clock: runtime.clock,
      streams,
      heartbeatMs,
      streamBufferBytes: options.streamBufferBytes,
      reportError,
    }),
  );
  if (options.timeline !== undefined) {
    app.route('/', inspectStreamRoutes({ timeline: options.timeline, streams, heartbeatMs }));
  }
  app.route('/', runRoutes({ access }));

  return {
    app,
    fetch: (request) => app.fetch(request),
    get draining() {
      return draining;
    },
    get openStreams() {
      return streams.size;
    },
    drain() {
      draining = true;
    },
    closeStreams() {
      streams.closeAll();
    },
    isSettling: ({ ownerId, sessionId }) => settling.has(JSON.stringify([ownerId, sessionId])),
    loopSessions,
    requeueRun: (session, record, input) => requeueRun(localOptions, session, record, input),
    close() {
      stopApprovalTimeouts();
    },
  };
}
