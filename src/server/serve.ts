/**
 * `runplane serve` as a function: SQLite stores in one WAL database, crash recovery, the
 * runtime, the default agent, the HTTP service on @hono/node-server, and graceful shutdown.
 *
 * @module
 */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createAdaptorServer } from '@hono/node-server';
import { createOpenAIModel } from '../agent/openai-model.js';
import type { Clock } from '../clock.js';
import type { LogFormat, LogLevel } from '../observability/logger.js';
import { InvalidArgumentError } from '../errors.js';
import type { Agent } from '../run/agent.js';
import { createRuntime, type Runtime } from '../runtime/create-runtime.js';
import { createTimelineHub } from '../inspect/timeline-hub.js';
import { createTokenAuthenticator, parseTokenList } from './auth.js';
import { createDemoAgent } from './demo-agent.js';
import { recoverCrashedRuns, type CrashedRun } from './recover.js';
import {
  answerClientErrorsAsJson,
  closeConnections,
  listen,
  missingHostAnswer,
  stopListening,
  trackConnections,
  type RequestHead,
} from './connections.js';
import { createDataSweeper, type DataSweeper } from './data-sweeper.js';
import { createServeObservability, type TraceparentMode } from './serve-observability.js';
import { createServiceApp, type Service } from './service-app.js';
import { openSqliteServeStores, type ServeStores } from './serve-stores.js';
import {
  isHandedOff,
  openRedisServeStores,
  type ClusterServeOptions,
} from '../cluster/serve-cluster.js';

/** An OpenAI-compatible endpoint for the default agent. */
export interface OpenAIEndpoint {
  /** The API root, e.g. `http://127.0.0.1:8000/v1`. */
  readonly baseURL: string;
  /** The bearer key; a local server may accept any non-empty string. */
  readonly apiKey: string;
  /** The model name. */
  readonly model: string;
}

/** Options of {@link startServer}. Every field is optional. */
export interface ServeOptions {
  /** The interface to listen on. @default '127.0.0.1' */
  readonly host?: string;
  /** The TCP port; 0 picks a free one. @default 8787 */
  readonly port?: number;
  /** The SQLite database file (its folder is created). @default './.runplane/runplane.db' */
  readonly dbPath?: string;
  /**
   * Run as one instance of a cluster on this Redis 7 server instead of on the SQLite database
   * (README "Cluster"): every instance serves every session; `dbPath` is not opened.
   * @default undefined (a single instance on SQLite)
   */
  readonly redis?: ClusterServeOptions;
  /**
   * Bearer tokens as `token:owner,token:owner`. Without it, a dev token for owner `dev` is
   * created once per database and printed at start.
   */
  readonly tokens?: string;
  /** How long shutdown lets running runs finish before cancelling them, in ms. @default 10000 */
  readonly graceMs?: number;
  /**
   * How long shutdown keeps idle keep-alive connections open once the drain is over, in ms:
   * a client about to reuse one is answered (with `Connection: close`) instead of reset.
   * @default 1000
   */
  readonly lingerMs?: number;
  /** Interval of SSE heartbeat comments, in ms. @default 15000 */
  readonly heartbeatMs?: number;
  /**
   * How long a request body may take to arrive once its headers are in, in ms; later is 408
   * `request_timeout`. @default 30000
   */
  readonly bodyTimeoutMs?: number;
  /**
   * Unread bytes one session SSE stream may buffer; a reader that leaves it full for a whole
   * heartbeat interval is ended and resumes with `Last-Event-ID`. @default 262144 (256 KiB)
   */
  readonly streamBufferBytes?: number;
  /** Open SSE streams one owner may hold at once (429 beyond). @default 128 */
  readonly maxStreamsPerOwner?: number;
  /**
   * The byte budget of the event log's in-memory tail, for the whole process: caught-up SSE
   * followers are served from it without a query (see `createSqliteEventLog`'s `tail.bytes`).
   * @default 8388608 (8 MiB)
   */
  readonly eventTailBytes?: number;
  /** The demo model's pause before each streamed word, in ms. @default 60 */
  readonly chunkDelayMs?: number;
  /** The demo tools that ask for confirmation first. @default ['clock'] */
  readonly confirmTools?: readonly string[];
  /** Total budget of each run, queue time included, in ms. @default none */
  readonly runTimeoutMs?: number;
  /**
   * Sessions with no activity (no event, no settings change) for this many days, and no
   * unfinished run, are deleted by the background sweep. @default none (kept forever)
   */
  readonly retentionDays?: number;
  /** Sessions one owner may have at once (429 `too_many_sessions` beyond). @default 10000 */
  readonly maxSessionsPerOwner?: number;
  /**
   * Runs of one owner running at once; more wait their turn (owners take turns for freed
   * slots). @default 8
   */
  readonly maxRunningRunsPerOwner?: number;
  /** Runs of one owner not yet ended, running or waiting (429 `too_many_runs` beyond). @default 1000 */
  readonly maxUnfinishedRunsPerOwner?: number;
  /** Runs running at once across all owners; more wait. @default unlimited */
  readonly maxConcurrentRuns?: number;
  /** Requests per second one owner may sustain (429 `rate_limited` beyond); 0 turns the limit off. @default 50 */
  readonly rateLimitPerSecond?: number;
  /** Requests one owner may send at once after a quiet spell. @default 200 */
  readonly rateLimitBurst?: number;
  /**
   * How long a tool call waits for its confirmation before it is denied with reason
   * `timeout`, in ms, for a session that sets no `approval_timeout_ms`. @default 600000
   */
  readonly approvalTimeoutMs?: number;
  /** The default agent's token budget of one model request (older turns are summarized). @default 24000 */
  readonly maxRequestTokens?: number;
  /** The default agent's longest tool result in a request, in tokens (cut with a marker). @default 4000 */
  readonly maxToolResultTokens?: number;
  /** What the default agent does with the older turns that do not fit. @default 'summary' */
  readonly contextOverflow?: 'summary' | 'drop';
  /** How often the default agent's model call retries a 429 or 5xx answer (openai client). @default 2 */
  readonly modelMaxRetries?: number;
  /** Use an OpenAI-compatible model instead of the scripted demo model. */
  readonly openai?: OpenAIEndpoint;
  /** Run this agent instead of the default one (tests, embedding). */
  readonly agent?: Agent<string, unknown>;
  /** The clock of the runtime, the demo model and the heartbeats. @default the system clock */
  readonly clock?: Clock;
  /** Where startup lines go. @default stdout */
  readonly log?: (line: string) => void;
  /** Receives unexpected errors. @default console.error */
  readonly reportError?: (error: unknown) => void;
  /**
   * Serve `GET /metrics` (Prometheus text) on the main port, behind this bearer token (not a
   * user token; 8-256 visible ASCII characters, else `INVALID_ARGUMENT`). @default none:
   * `/metrics` is off unless this or `metricsPort` is given
   */
  readonly metricsToken?: string;
  /** Serve `GET /metrics` on a listener of its own on this port (0: any free one). @default none */
  readonly metricsPort?: number;
  /**
   * The interface of the `metricsPort` listener (not `host`: the main port may face the
   * network while metrics stay local). Beyond loopback with no `metricsToken`, a warning is
   * printed at start. @default '127.0.0.1'
   */
  readonly metricsHost?: string;
  /**
   * One line per request and per run end: `json` (pino JSON lines), `pretty` (for a terminal)
   * or `none`. The startup lines go to `log` either way. @default 'none' (`runplane serve`: 'json')
   */
  readonly logFormat?: LogFormat;
  /** The lowest level logged. @default 'info' */
  readonly logLevel?: LogLevel;
  /** Where request and run lines go. @default stdout */
  readonly logDestination?: { write(line: string): void };
  /**
   * What a request's `traceparent` is to the runs it starts: `parent` (the caller's sampled
   * flag decides whether they record), `link` (root spans this process samples, linked to the
   * caller) or `ignore`. @default 'parent'
   */
  readonly traceparent?: TraceparentMode;
}

/** A running server. */
export interface RunningServer {
  /** The base URL, e.g. `http://127.0.0.1:8787`. */
  readonly url: string;
  readonly host: string;
  readonly port: number;
  /** The dev token, when no tokens were configured. */
  readonly devToken: string | undefined;
  /** Where `GET /metrics` answers, when it is on (`metricsToken` or `metricsPort`). */
  readonly metricsUrl: string | undefined;
  /** Runs the previous process left unfinished, now FAILED with cause `crashed`. */
  readonly recovered: readonly CrashedRun[];
  readonly runtime: Runtime;
  readonly service: Service;
  /**
   * Shuts down gracefully (idempotent). At once: the listener stops accepting connections, and
   * on the connections still open new work (a new session, a `user.message`) gets 503
   * `shutting_down` with `Retry-After` and `Connection: close`, while reads, streams and
   * `user.interrupt` keep working; queued runs are cancelled, running ones interrupted. After
   * `graceMs` what is left is cancelled; then SSE streams send their tail and end, answers in
   * progress complete (at most 10 s more), idle keep-alive connections are kept `lingerMs`
   * more (a request on one is answered, with `Connection: close`), and the database is
   * closed. No accepted request is reset.
   *
   * @returns `{ drained }`: whether every running run finished within the grace period
   */
  shutdown(options?: { graceMs?: number }): Promise<{ drained: boolean }>;
}

const checkDuration = (name: string, value: number | undefined, positive = false) => {
  if (value === undefined) return;
  if (!Number.isFinite(value) || value < 0 || (positive && value === 0)) {
    throw new InvalidArgumentError(
      name,
      `expected \`${name}\` to be a ${positive ? 'positive' : 'non-negative'} number of milliseconds, got ${String(value)}`,
    );
  }
};

/**
 * Starts `runplane serve`.
 *
 * @remarks Opens (or creates) the database, marks runs a dead process left unfinished as
 * FAILED with cause `crashed` (see {@link recoverCrashedRuns}), then listens. All stores share
 * the one database: the event log, session histories, the inbox, session and run records.
 *
 * @param options - {@link ServeOptions}
 * @returns the {@link RunningServer} once it listens
 * @throws {@link InvalidArgumentError} (`INVALID_ARGUMENT`) for a bad option (e.g. a bad token
 *   list)
 * @throws {@link RunplaneError} (`STORE_FAILED`) when the database cannot be opened
 * @throws the listen error (e.g. `EADDRINUSE`) when the port cannot be bound; the database is
 *   closed again
 * @example
 * ```ts
 * const server = await startServer({ port: 0, dbPath: '/tmp/runplane.db' });
 * console.log(server.url, server.devToken);
 * await server.shutdown();
 * ```
 */
export async function startServer(options: ServeOptions = {}): Promise<RunningServer> {
  const host = options.host ?? '127.0.0.1';
  const port = options.port ?? 8787;
  if (!Number.isInteger(port) || port < 0 || port > 65_535) {
    throw new InvalidArgumentError('port', `expected \`port\` to be 0-65535, got ${String(port)}`);
  }
  checkDuration('graceMs', options.graceMs);
  checkDuration('lingerMs', options.lingerMs);
  checkDuration('heartbeatMs', options.heartbeatMs, true);
  checkDuration('chunkDelayMs', options.chunkDelayMs);
  checkDuration('runTimeoutMs', options.runTimeoutMs, true);
  checkDuration('bodyTimeoutMs', options.bodyTimeoutMs, true);
  const tokenMap = options.tokens === undefined ? undefined : parseTokenList(options.tokens);
  const dbPath = options.dbPath ?? './.runplane/runplane.db';
  const log = options.log ?? ((line: string) => process.stdout.write(`${line}\n`));
  const report =
    options.reportError ?? ((error: unknown) => console.error('[runplane serve]', error));
  // In a cluster, the writes of a session this instance no longer drives are refused by design
  // (its new holder goes on from Redis): the loss is logged once, not every refused write.
  const reportError =
    options.redis === undefined
      ? report
      : (error: unknown) => {
          if (!isHandedOff(error)) report(error);
        };

  if (
    options.retentionDays !== undefined &&
    !(Number.isFinite(options.retentionDays) && options.retentionDays > 0)
  ) {
    throw new InvalidArgumentError(
      'retentionDays',
      `expected \`retentionDays\` to be a positive number of days, got ${String(options.retentionDays)}`,
    );
  }
  if (options.redis !== undefined && options.retentionDays !== undefined) {
    throw new InvalidArgumentError(
      'retentionDays',
      'expected no `retentionDays` with `redis`: a cluster does not expire idle sessions yet (README "Cluster")',
    );
  }
  const observability = createServeObservability(options);
  const stores: ServeStores =
    options.redis === undefined
      ? openSqliteServeStores({ dbPath, eventTailBytes: options.eventTailBytes })
      : await openRedisServeStores({ ...options.redis, reportError, log });
  const { cluster } = stores;
  let service: Service | undefined;
  let sweeper: DataSweeper | undefined;
  try {
    const { sessionStore, inbox, sessions, runs, idempotencyKeys, checkpoints } = stores;
    const eventLog = observability.countAppends(stores.eventLog);
    const devToken = tokenMap === undefined ? await stores.devToken() : undefined;
    const authenticate = createTokenAuthenticator(tokenMap ?? new Map([[devToken ?? '', 'dev']]));

    const rateLimit =
      options.rateLimitPerSecond === 0
        ? undefined
        : { perSecond: options.rateLimitPerSecond ?? 50, burst: options.rateLimitBurst ?? 200 };
    const timeline = createTimelineHub({ clock: options.clock, onError: reportError });
    const runtime = createRuntime({
      clock: options.clock,
      stores: { eventLog, sessionStore, inbox },
      inspect: timeline.inspect,
      reportError,
      maxRunningRunsPerOwner: options.maxRunningRunsPerOwner ?? 8,
      maxConcurrentRuns: options.maxConcurrentRuns,
      metrics: observability.runMetrics,
    });
    // A cluster has no dead process to recover from: a session whose holder died is taken, and
    // its runs marked, by the next instance that holds it.
    const recovered =
      cluster === undefined
        ? await recoverCrashedRuns({ runs, eventLog, clock: runtime.clock })
        : [];
    const agent =
      options.agent ??
      createDemoAgent({
        clock: runtime.clock,
        chunkDelayMs: options.chunkDelayMs,
        confirmTools: options.confirmTools,
        historyPolicy: {
          maxRequestTokens: options.maxRequestTokens,
          maxToolResultTokens: options.maxToolResultTokens,
          overflow: options.contextOverflow,
        },
        model:
          options.openai === undefined
            ? undefined
            : createOpenAIModel({ ...options.openai, maxRetries: options.modelMaxRetries }),
      });
    const sweep = createDataSweeper({
      purge: stores.createPurge((key) => {
        eventLog.forget(key);
        // A purged loop session's loop and checkpoint go with it (a cluster's purge deleted
        // the checkpoint, and its loop ended with its lease).
        if (cluster === undefined) service?.loopSessions.remove(key).catch(reportError);
      }),
      sessions,
      clock: runtime.clock,
      retentionMs:
        options.retentionDays === undefined ? undefined : options.retentionDays * 86_400_000,
      skip: (key) => service?.isSettling(key) === true,
      reportError,
      onSwept: ({ expired, purged, steps }) =>
        log(
          `runplane serve: sweep: ${purged} deleted session(s) purged (${steps} delete steps)${expired > 0 ? `, ${expired} of them expired by --retention-days` : ''}`,
        ),
    });
    sweeper = sweep;
    service = createServiceApp({
      runtime,
      agent,
      sessions,
      runs,
      authenticate,
      heartbeatMs: options.heartbeatMs,
      bodyTimeoutMs: options.bodyTimeoutMs,
      maxStreamsPerOwner: options.maxStreamsPerOwner,
      streamBufferBytes: options.streamBufferBytes,
      runTimeoutMs: options.runTimeoutMs,
      idempotencyKeys,
      reportError,
      timeline,
      maxSessionsPerOwner: options.maxSessionsPerOwner,
      maxUnfinishedRunsPerOwner: options.maxUnfinishedRunsPerOwner,
      rateLimit,
      rateBuckets: rateLimit === undefined ? undefined : cluster?.rateBuckets(rateLimit),
      approvalTimeoutMs: options.approvalTimeoutMs,
      onSessionDeleted: () => sweep.kick(),
      checkpointStore: checkpoints,
      sessionAccess:
        cluster === undefined
          ? undefined
          : (local) =>
              cluster.sessionAccess(local, {
                runtime,
                service: () => service!,
                maxSessionsPerOwner: options.maxSessionsPerOwner,
                defaultApprovalTimeoutMs: options.approvalTimeoutMs,
              }),
    });
    const running = service;
    observability.readOpenStreams(() => running.openStreams);
    const observed = observability.observe((request) => running.fetch(request));

    const server = createAdaptorServer({
      // Node would answer an HTTP/1.1 request without Host itself, with a bare 400.
      fetch: (request: Request, env: { incoming: RequestHead }) =>
        missingHostAnswer(env.incoming) ?? observed(request),
      hostname: host,
      serverOptions: { requireHostHeader: false },
    }) as Server;
    const tracker = trackConnections(server);
    answerClientErrorsAsJson(server);
    let address: AddressInfo;
    let metrics: { url: string; warning: string | undefined } | undefined;
    try {
      address = await listen(server, port, host);
      metrics = await observability.listen(address);
    } catch (error) {
      await stopListening(server);
      await runtime.shutdown({ graceMs: 0 });
      throw error;
    }
    // Loop sessions with work left (a checkpoint, or messages no finished turn answered) go on.
    // In a cluster, each goes on where its session is next held.
    const resumedLoops = cluster === undefined ? await running.loopSessions.resumeAll() : 0;
    cluster?.start();
    const shownHost = address.family === 'IPv6' ? `[${address.address}]` : address.address;
    const url = `http://${shownHost}:${address.port}`;

    log(`runplane serve: ${stores.banner}`);
    log(
      `  agent: ${
        options.agent !== undefined
          ? 'custom'
          : options.openai !== undefined
            ? `ReAct on ${options.openai.model} at ${options.openai.baseURL}`
            : 'ReAct on the scripted demo model'
      }; tools calculator, clock (confirmation: ${(options.confirmTools ?? ['clock']).join(', ') || 'none'})`,
    );
    if (devToken !== undefined) {
      log(`  dev token (owner "dev"): ${devToken}`);
      log(`  chat page: ${url}/#token=${devToken}`);
    } else {
      log(`  tokens: ${tokenMap?.size ?? 0} configured; chat page: ${url}/`);
    }
    if (recovered.length > 0) {
      log(
        `  recovered ${recovered.length} run(s) the previous process left unfinished: FAILED, cause crashed`,
      );
    }

    if (resumedLoops > 0) {
      log(`  resumed ${resumedLoops} loop session(s) from their checkpoint and log`);
    }

    const metricsUrl = metrics?.url;
    if (metrics !== undefined) {
      log(
        `  metrics: ${metrics.url}${options.metricsToken === undefined ? '' : ' (bearer: the metrics token)'}`,
      );
      if (metrics.warning !== undefined) log(`  warning: ${metrics.warning}`);
    }
    // Last, so that a reader waiting for it has every line above.
    log(`runplane serve: listening on ${url}`);

    let stopping: Promise<{ drained: boolean }> | undefined;
    const shutdown = (shutdownOptions: { graceMs?: number } = {}) => {
      stopping ??= (async () => {
        // New work is refused (503, Connection: close) on the connections still open, and no
        // new connection is accepted; reads, streams and stops keep working until the drain
        // ends.
        running.drain();
        const ended = stopListening(server);
        const graceMs = shutdownOptions.graceMs ?? options.graceMs ?? 10_000;
        // A cluster instance hands its sessions' waiting runs to the others first.
        await cluster?.drain();
        // Loops first: each turn stops at its next safe point and checkpoints (an interrupt
        // from the runtime's shutdown would instead end it as answered).
        await running.loopSessions.stopAll({ graceMs });
        const { drained } = await runtime.shutdown({ graceMs });
        running.closeStreams();
        await closeConnections(server, tracker, options.lingerMs ?? 1_000, ended);
        await sweep.stop();
        await observability.close();
        running.close();
        await stores.close();
        return { drained };
      })();
      return stopping;
    };

    return {
      url,
      host,
      port: address.port,
      devToken,
      metricsUrl,
      recovered,
      runtime,
      service: running,
      shutdown,
    };
  } catch (error) {
    await observability.close();
    await sweeper?.stop();
    service?.close();
    await stores.close();
    throw error;
  }
}

/**
 * Waits for SIGTERM or SIGINT, then shuts `server` down gracefully. A second signal exits
 * the process at once with code 1.
 *
 * @param server - the running server
 * @param options - `graceMs`: the grace period, in ms; `log`: where to report; `signalled`: a
 *   signal that arrived before (while the server started), acted on at once
 * @returns the exit code once the server has stopped: 0 when it drained, 1 when runs had to
 *   be cancelled or the shutdown failed
 */
export function serveUntilSignal(
  server: RunningServer,
  options: { graceMs?: number; log?: (line: string) => void; signalled?: NodeJS.Signals } = {},
): Promise<number> {
  const log = options.log ?? ((line: string) => process.stdout.write(`${line}\n`));
  return new Promise<number>((resolve) => {
    let signalled = false;
    const onSignal = (signal: NodeJS.Signals) => {
      if (signalled) {
        log(`runplane serve: ${signal} again, exiting now`);
        process.exit(1);
      }
      signalled = true;
      log(`runplane serve: ${signal}, shutting down (new work gets 503)`);
      server.shutdown({ graceMs: options.graceMs }).then(
        ({ drained }) => {
          log(`runplane serve: stopped (${drained ? 'drained' : 'runs were cancelled'})`);
          process.off('SIGTERM', onSignal);
          process.off('SIGINT', onSignal);
          resolve(drained ? 0 : 1);
        },
        (error: unknown) => {
          log(
            `runplane serve: shutdown failed: ${error instanceof Error ? error.message : String(error)}`,
          );
          resolve(1);
        },
      );
    };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
    if (options.signalled !== undefined) onSignal(options.signalled);
  });
}
