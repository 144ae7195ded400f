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
import { InvalidArgumentError } from '../errors.js';
import { createRuntime } from '../runtime/create-runtime.js';
import { createTimelineHub } from '../inspect/timeline-hub.js';
import { createTokenAuthenticator, parseTokenList } from './auth.js';
import { createDemoAgent } from './demo-agent.js';
import { recoverCrashedRuns } from './recover.js';
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
import { createServeObservability } from './serve-observability.js';
import { createServiceApp, type Service } from './service-app.js';
import { openSqliteServeStores, type ServeStores } from './serve-stores.js';
import { isHandedOff, openRedisServeStores } from '../cluster/serve-cluster.js';
import {
  boundByStoreWait,
  describeAbandonedShutdown,
  shutdownStoreWaitMs,
} from '../cluster/shutdown-bound.js';

import type { RunningServer, ServeOptions } from './serve-options.js';

export type {
  ClusterServeOptions,
  OpenAIEndpoint,
  RunningServer,
  ServeOptions,
} from './serve-options.js';

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
    const serviceAgent =
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
    // In a cluster, the runs of `resume` sessions record their safe points (README "Cluster").
    const agent = cluster === undefined ? serviceAgent : cluster.recordingAgent(serviceAgent);
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
      storeHealth: cluster?.storeHealth,
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
                onDeletedReleased: () => sweep.kick(),
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

    let stopping: Promise<{ drained: boolean; abandoned?: boolean }> | undefined;
    const shutdown = (shutdownOptions: { graceMs?: number } = {}) => {
      const graceMs = shutdownOptions.graceMs ?? options.graceMs ?? 10_000;
      // Counted before the drain releases any: what the log line names if Redis never answers.
      const held = cluster?.instance.heldSessions().length ?? 0;
      stopping ??= boundShutdown(
        (async () => {
          // New work is refused (503, Connection: close) on the connections still open, and no
          // new connection is accepted; reads, streams and stops keep working until the drain
          // ends.
          running.drain();
          const ended = stopListening(server);
          // A cluster instance hands its sessions' waiting runs to the others first.
          await cluster?.drain({ graceMs });
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
        })(),
        graceMs,
        held,
      );
      return stopping;
    };
    /**
     * In a cluster, a shutdown that Redis holds up past its grace and `shutdownStoreWaitMs`
     * more, while Redis fails a `PING`, stops waiting: its sessions go to failover (README
     * "Cluster", a frozen Redis).
     */
    const boundShutdown = (
      work: Promise<{ drained: boolean }>,
      graceMs: number,
      held: number,
    ): Promise<{ drained: boolean; abandoned?: boolean }> => {
      if (cluster === undefined) return work;
      return boundByStoreWait<{ drained: boolean; abandoned?: boolean }>(work, {
        afterMs: graceMs + shutdownStoreWaitMs,
        health: cluster.storeHealth,
        onAbandon(problem) {
          log(describeAbandonedShutdown(held, options.redis?.leaseTtlMs ?? 10_000, problem));
          return { drained: false, abandoned: true };
        },
      });
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
        ({ drained, abandoned }) => {
          if (abandoned === true) {
            // The shutdown's Redis writes are still pending (they would keep the process up).
            log('runplane serve: stopped (Redis did not answer; sessions left to failover)');
            process.exit(1);
          }
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
