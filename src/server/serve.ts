/**
 * `runplane serve` as a function: SQLite stores in one WAL database, crash recovery, the
 * runtime, the default agent, the HTTP service on @hono/node-server, and graceful shutdown.
 *
 * @module
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { Server as NetServer, type AddressInfo, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { createAdaptorServer } from '@hono/node-server';
import type Database from 'better-sqlite3';
import { createOpenAIModel } from '../agent/openai-model.js';
import type { Clock } from '../clock.js';
import { InvalidArgumentError } from '../errors.js';
import type { Agent } from '../run/agent.js';
import { createRuntime, type Runtime } from '../runtime/create-runtime.js';
import { createTimelineHub } from '../inspect/timeline-hub.js';
import {
  applySqliteMigrations,
  openSqliteDatabase,
  type SqliteMigration,
} from '../stores/sqlite/database.js';
import { createSqliteEventLog } from '../stores/sqlite/event-log.js';
import { createSqliteIdempotencyKeys } from '../stores/sqlite/idempotency-keys.js';
import { createSqliteInbox } from '../stores/sqlite/inbox.js';
import { createSqliteRunRecords } from '../stores/sqlite/run-records.js';
import { createSqliteSessionRecords } from '../stores/sqlite/session-records.js';
import { createSqliteSessionStore } from '../stores/sqlite/session-store.js';
import { createDevToken, createTokenAuthenticator, parseTokenList } from './auth.js';
import { createDemoAgent } from './demo-agent.js';
import { recoverCrashedRuns, type CrashedRun } from './recover.js';
import { HttpError } from './http-error.js';
import { createServiceApp, type Service } from './service-app.js';

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
}

/** A running server. */
export interface RunningServer {
  /** The base URL, e.g. `http://127.0.0.1:8787`. */
  readonly url: string;
  readonly host: string;
  readonly port: number;
  /** The dev token, when no tokens were configured. */
  readonly devToken: string | undefined;
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

const settingsMigrations: readonly SqliteMigration[] = [
  {
    id: 'serve/1',
    sql: `CREATE TABLE runplane_settings (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;`,
  },
];

const statusText: Record<number, string> = {
  400: 'Bad Request',
  408: 'Request Timeout',
  417: 'Expectation Failed',
  431: 'Request Header Fields Too Large',
};

/** A whole HTTP/1.1 error answer in the service's JSON shape, closing the connection. */
const rawErrorAnswer = (httpError: HttpError): string => {
  const body = JSON.stringify(httpError.toBody());
  return (
    `HTTP/1.1 ${httpError.status} ${statusText[httpError.status] ?? 'Error'}\r\n` +
    'content-type: application/json\r\n' +
    `content-length: ${Buffer.byteLength(body)}\r\n` +
    'connection: close\r\n\r\n' +
    body
  );
};

/**
 * Node answers a request it cannot parse (oversized headers, a malformed request line, a
 * header timeout) itself, with a bare status line. Answer those in the service's JSON error
 * shape instead, then close the connection.
 */
function answerClientErrorsAsJson(server: Server): void {
  server.on('clientError', (error: NodeJS.ErrnoException, socket: Duplex) => {
    if (error.code === 'ECONNRESET' || !socket.writable) {
      socket.destroy();
      return;
    }
    const httpError =
      error.code === 'HPE_HEADER_OVERFLOW'
        ? new HttpError('headers_too_large', 'expected request headers of at most 16 KiB')
        : error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
          ? new HttpError('request_timeout', 'the request did not arrive in time')
          : new HttpError('bad_request', 'expected a well-formed HTTP/1.1 request');
    socket.end(rawErrorAnswer(httpError));
  });
  // Node answers an `Expect` other than `100-continue` with a bare 417 unless someone listens.
  server.on('checkExpectation', (request: IncomingMessage, response: ServerResponse) => {
    const httpError = new HttpError(
      'expectation_failed',
      `expected no Expect header or \`Expect: 100-continue\`, got ${JSON.stringify(String(request.headers.expect).slice(0, 40))}`,
    );
    request.socket.end(rawErrorAnswer(httpError));
    response.destroy();
  });
}

/** What {@link missingHostAnswer} reads of a request (HTTP/1 and HTTP/2 requests have it). */
interface RequestHead {
  readonly httpVersion: string;
  readonly headers: { readonly host?: string | undefined };
}

/**
 * The JSON answer to an HTTP/1.1 request without `Host` (RFC 9112 §3.2), which Node would
 * answer itself with a bare 400: the server is created with `requireHostHeader: false` and asks
 * this first.
 */
function missingHostAnswer(incoming: RequestHead): Response | undefined {
  if (incoming.httpVersion !== '1.1' || incoming.headers.host !== undefined) return undefined;
  const httpError = new HttpError('bad_request', 'expected a Host header in an HTTP/1.1 request');
  return new Response(JSON.stringify(httpError.toBody()), {
    status: httpError.status,
    headers: { 'content-type': 'application/json', connection: 'close' },
  });
}

/** The dev token of this database: created on first start, the same on every later one. */
function devTokenOf(db: Database.Database): string {
  applySqliteMigrations(db, settingsMigrations);
  const read = db.prepare<[], { value: string }>(
    "SELECT value FROM runplane_settings WHERE key = 'dev_token'",
  );
  const existing = read.get()?.value;
  if (existing !== undefined) return existing;
  const token = createDevToken();
  db.prepare("INSERT INTO runplane_settings (key, value) VALUES ('dev_token', ?)").run(token);
  return token;
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

function listen(server: Server, port: number, host: string): Promise<AddressInfo> {
  return new Promise((resolve, reject) => {
    const onError = (error: Error) => reject(error);
    server.once('error', onError);
    server.listen(port, host, () => {
      server.off('error', onError);
      resolve(server.address() as AddressInfo);
    });
  });
}

/** How long shutdown waits for answers still in progress once the drain ended, in ms. */
const answerDeadlineMs = 10_000;

/**
 * Stops accepting connections at once, and resolves once every connection has ended.
 *
 * @remarks `http.Server#close` would also close idle keep-alive connections at once (Node 19
 * and later), resetting a client that is about to reuse one; `net.Server#close` only stops the
 * listener, so those connections stay open to be answered (503 `shutting_down` with
 * `Connection: close` for new work) until the drain ends.
 */
function stopListening(server: Server): Promise<void> {
  return new Promise((resolve) => {
    NetServer.prototype.close.call(server, () => resolve());
  });
}

/**
 * Counts the answers in progress (from a request's arrival until its response has closed) and
 * the open connections; once `closing()` was called, every answer says `Connection: close`.
 */
function trackConnections(server: Server) {
  let answers = 0;
  let connections = 0;
  let closing = false;
  let onChange: (() => void) | undefined;
  server.on('connection', (socket: Socket) => {
    connections++;
    socket.once('close', () => {
      connections--;
      onChange?.();
    });
  });
  server.on('request', (_request, response: ServerResponse) => {
    answers++;
    if (closing) response.setHeader('Connection', 'close');
    response.once('close', () => {
      answers--;
      onChange?.();
    });
  });
  /** Resolves once `done()` holds (`true`), or after `ms` (`false`). */
  const until = (done: () => boolean, ms: number): Promise<boolean> => {
    if (done()) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        onChange = undefined;
        resolve(false);
      }, ms);
      onChange = () => {
        if (!done()) return;
        clearTimeout(timer);
        onChange = undefined;
        resolve(true);
      };
    });
  };
  return {
    /** From now on every answer closes its connection. */
    closing() {
      closing = true;
    },
    /** Resolves once no answer is in progress, or after `ms`. */
    answered: (ms: number) => until(() => answers === 0, ms),
    /** Resolves once every connection has closed, or after `ms`. */
    disconnected: (ms: number) => until(() => connections === 0, ms),
  };
}

/**
 * Ends the connections once the drain is over: waits for every answer in progress (SSE
 * streams were ended, with their tails, before; at most {@link answerDeadlineMs}); then keeps
 * the idle connections for `lingerMs`, answering any request on them with `Connection: close`,
 * so that a client about to reuse one is answered, not reset; then closes what is left.
 */
async function closeConnections(
  server: Server,
  tracker: ReturnType<typeof trackConnections>,
  lingerMs: number,
  ended: Promise<void>,
): Promise<void> {
  tracker.closing();
  await tracker.answered(answerDeadlineMs);
  if (lingerMs > 0) await tracker.disconnected(lingerMs);
  // http.Server#close: the listener is already closed; this stops Node's connection timer.
  server.close();
  server.closeAllConnections();
  await ended;
}

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
  const reportError =
    options.reportError ?? ((error: unknown) => console.error('[runplane serve]', error));

  const db = openSqliteDatabase({ path: dbPath });
  try {
    const eventLog = createSqliteEventLog({
      database: db,
      tail: { bytes: options.eventTailBytes },
    });
    const sessionStore = createSqliteSessionStore({ database: db });
    const inbox = createSqliteInbox({ database: db });
    const sessions = createSqliteSessionRecords({ database: db });
    const runs = createSqliteRunRecords({ database: db });
    const idempotencyKeys = createSqliteIdempotencyKeys({ database: db });
    const devToken = tokenMap === undefined ? devTokenOf(db) : undefined;
    const authenticate = createTokenAuthenticator(tokenMap ?? new Map([[devToken ?? '', 'dev']]));

    const timeline = createTimelineHub({ clock: options.clock, onError: reportError });
    const runtime = createRuntime({
      clock: options.clock,
      stores: { eventLog, sessionStore, inbox },
      inspect: timeline.inspect,
      reportError,
    });
    const recovered = await recoverCrashedRuns({ runs, eventLog, clock: runtime.clock });
    const agent =
      options.agent ??
      createDemoAgent({
        clock: runtime.clock,
        chunkDelayMs: options.chunkDelayMs,
        confirmTools: options.confirmTools,
        model: options.openai === undefined ? undefined : createOpenAIModel(options.openai),
      });
    const service = createServiceApp({
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
    });

    const server = createAdaptorServer({
      // Node would answer an HTTP/1.1 request without Host itself, with a bare 400.
      fetch: (request: Request, env: { incoming: RequestHead }) =>
        missingHostAnswer(env.incoming) ?? service.fetch(request),
      hostname: host,
      serverOptions: { requireHostHeader: false },
    }) as Server;
    const tracker = trackConnections(server);
    answerClientErrorsAsJson(server);
    let address: AddressInfo;
    try {
      address = await listen(server, port, host);
    } catch (error) {
      await runtime.shutdown({ graceMs: 0 });
      throw error;
    }
    const shownHost = address.family === 'IPv6' ? `[${address.address}]` : address.address;
    const url = `http://${shownHost}:${address.port}`;

    log(`runplane serve: database ${dbPath}`);
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

    // Last, so that a reader waiting for it has every line above.
    log(`runplane serve: listening on ${url}`);

    let stopping: Promise<{ drained: boolean }> | undefined;
    const shutdown = (shutdownOptions: { graceMs?: number } = {}) => {
      stopping ??= (async () => {
        // New work is refused (503, Connection: close) on the connections still open, and no
        // new connection is accepted; reads, streams and stops keep working until the drain
        // ends.
        service.drain();
        const ended = stopListening(server);
        const { drained } = await runtime.shutdown({
          graceMs: shutdownOptions.graceMs ?? options.graceMs ?? 10_000,
        });
        service.closeStreams();
        await closeConnections(server, tracker, options.lingerMs ?? 1_000, ended);
        eventLog.close();
        db.close();
        return { drained };
      })();
      return stopping;
    };

    return {
      url,
      host,
      port: address.port,
      devToken,
      recovered,
      runtime,
      service,
      shutdown,
    };
  } catch (error) {
    if (db.open) db.close();
    throw error;
  }
}

/**
 * Waits for SIGTERM or SIGINT, then shuts `server` down gracefully. A second signal exits
 * the process at once with code 1.
 *
 * @param server - the running server
 * @param options - `graceMs`: the grace period, in ms; `log`: where to report
 * @returns the exit code once the server has stopped: 0 when it drained, 1 when runs had to
 *   be cancelled or the shutdown failed
 */
export function serveUntilSignal(
  server: RunningServer,
  options: { graceMs?: number; log?: (line: string) => void } = {},
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
  });
}
