/**
 * Server test helpers: the service on real SQLite files in a tmp dir, a simulated clock,
 * in-memory requests (`app.request`), and an SSE reader that waits for frames (never for time).
 */
import type { TimelineHub } from '../../src/inspect/timeline-hub.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type Database from 'better-sqlite3';
import { SimulatedClock } from 'xstate';
import type { EventLog, RunplaneEvent } from '../../src/events/event-log.js';
import type { Agent } from '../../src/run/agent.js';
import { createRuntime } from '../../src/runtime/create-runtime.js';
import { createTokenAuthenticator } from '../../src/server/auth.js';
import { createServiceApp } from '../../src/server/service-app.js';
import type { SessionAccess } from '../../src/server/session-access.js';
import { openSqliteDatabase } from '../../src/stores/sqlite/database.js';
import { createSqliteEventLog } from '../../src/stores/sqlite/event-log.js';
import { createSqliteIdempotencyKeys } from '../../src/stores/sqlite/idempotency-keys.js';
import { createSqliteInbox } from '../../src/stores/sqlite/inbox.js';
import { createSqliteRunRecords } from '../../src/stores/sqlite/run-records.js';
import { createSqliteSessionRecords } from '../../src/stores/sqlite/session-records.js';
import { createSqliteSessionStore } from '../../src/stores/sqlite/session-store.js';
import { createSqliteSessionPurge } from '../../src/stores/sqlite/session-purge.js';

export const ALICE = 'alice-token-1';
export const BOB = 'bob-token-22';

/** Lets pending promise callbacks run (macrotask turns; not a timed sleep). */
export async function flush(rounds = 5): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise((resolve) => setImmediate(resolve));
}

export interface TestServiceOptions {
  readonly agent?: Agent<string, unknown>;
  /** An agent built on the service's simulated clock (e.g. the demo agent). */
  readonly agentOn?: (clock: SimulatedClock) => Agent<string, unknown>;
  readonly heartbeatMs?: number;
  readonly maxBodyBytes?: number;
  readonly bodyTimeoutMs?: number;
  readonly maxStreamsPerOwner?: number;
  readonly maxPendingHints?: number;
  readonly maxIdempotencyKeysPerOwner?: number;
  /** Wraps the SQLite event log (e.g. to make `follow` fail). */
  readonly wrapEventLog?: (log: EventLog) => EventLog;
  /** Serve the live timeline (`/inspect`) from this hub. */
  readonly timeline?: TimelineHub;
  readonly maxSessionsPerOwner?: number;
  readonly maxUnfinishedRunsPerOwner?: number;
  readonly rateLimit?: { perSecond: number; burst: number };
  readonly approvalTimeoutMs?: number;
  readonly onSessionDeleted?: (key: { ownerId: string; sessionId: string }) => void;
  /** Wraps the local session access the routes use (`ServiceOptions.sessionAccess`). */
  readonly sessionAccess?: (local: SessionAccess) => SessionAccess;
  /** Runtime-wide run caps. */
  readonly maxConcurrentRuns?: number;
  readonly maxRunningRunsPerOwner?: number;
}

/** The service on a fresh SQLite file and a simulated clock. */
export function createTestService(options: TestServiceOptions = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'runplane-server-'));
  const db: Database.Database = openSqliteDatabase({ path: join(dir, 'runplane.db') });
  const sqliteLog = createSqliteEventLog({ database: db });
  const eventLog = options.wrapEventLog?.(sqliteLog) ?? sqliteLog;
  const clock = new SimulatedClock();
  const reported: unknown[] = [];
  const runtime = createRuntime({
    clock,
    unwindTimeoutMs: 1_000,
    stores: {
      eventLog,
      sessionStore: createSqliteSessionStore({ database: db }),
      inbox: createSqliteInbox({ database: db }),
    },
    reportError: (error) => reported.push(error),
    inspect: options.timeline?.inspect,
    maxConcurrentRuns: options.maxConcurrentRuns,
    maxRunningRunsPerOwner: options.maxRunningRunsPerOwner,
  });
  const runs = createSqliteRunRecords({ database: db });
  const sessions = createSqliteSessionRecords({ database: db });
  const agent =
    options.agent ??
    options.agentOn?.(clock) ??
    ({
      execute: () => Promise.reject(new Error('this test sends no message')),
    } satisfies Agent<string, unknown>);
  const service = createServiceApp({
    runtime,
    agent,
    sessions,
    runs,
    authenticate: createTokenAuthenticator(
      new Map([
        [ALICE, 'alice'],
        [BOB, 'bob'],
      ]),
    ),
    heartbeatMs: options.heartbeatMs,
    maxBodyBytes: options.maxBodyBytes,
    bodyTimeoutMs: options.bodyTimeoutMs,
    maxStreamsPerOwner: options.maxStreamsPerOwner,
    maxPendingHints: options.maxPendingHints,
    maxIdempotencyKeysPerOwner: options.maxIdempotencyKeysPerOwner,
    idempotencyKeys: createSqliteIdempotencyKeys({ database: db }),
    reportError: (error) => reported.push(error),
    timeline: options.timeline,
    maxSessionsPerOwner: options.maxSessionsPerOwner,
    maxUnfinishedRunsPerOwner: options.maxUnfinishedRunsPerOwner,
    rateLimit: options.rateLimit,
    approvalTimeoutMs: options.approvalTimeoutMs,
    onSessionDeleted: options.onSessionDeleted,
    sessionAccess: options.sessionAccess,
  });

  const request = (
    method: string,
    path: string,
    init: { body?: unknown; token?: string | null; headers?: Record<string, string> } = {},
  ) => {
    const headers: Record<string, string> = { ...init.headers };
    const token = init.token === undefined ? ALICE : init.token;
    if (token !== null) headers.authorization = `Bearer ${token}`;
    let body: string | undefined;
    if (init.body !== undefined) {
      body = typeof init.body === 'string' ? init.body : JSON.stringify(init.body);
      headers['content-type'] ??= 'application/json';
    }
    return service.app.request(path, { method, headers, body });
  };

  const json = async (response: Response): Promise<Record<string, unknown>> =>
    (await response.json()) as Record<string, unknown>;

  /** Creates a session of alice (or of `token`'s owner); returns its id. */
  const createSession = async (body: unknown = {}, token = ALICE): Promise<string> => {
    const response = await request('POST', '/api/sessions', { body, token });
    if (response.status !== 201) throw new Error(`create session: ${response.status}`);
    return (await json(response)).session_id as string;
  };

  /** Posts an event batch; returns status and body. */
  const post = async (sessionId: string, events: unknown[], token = ALICE) => {
    const response = await request('POST', `/api/sessions/${sessionId}/events`, {
      body: { events },
      token,
    });
    return { status: response.status, body: await json(response) };
  };

  /** Sends one user.message and returns its run id. */
  const send = async (sessionId: string, text: string, extra: Record<string, unknown> = {}) => {
    const { status, body } = await post(sessionId, [
      { type: 'user.message', payload: { text, ...extra } },
    ]);
    if (status !== 200) throw new Error(`send: ${status} ${JSON.stringify(body)}`);
    return (body.results as Array<{ run_id: string }>)[0]?.run_id ?? '';
  };

  /** Every event of alice's session. */
  const events = (sessionId: string, ownerId = 'alice'): Promise<RunplaneEvent[]> =>
    eventLog.read({}, { ownerId, sessionId });

  /** Resolves with the first logged event matching `predicate`, from the log or from now on. */
  const waitForEvent = async (
    sessionId: string,
    predicate: (event: RunplaneEvent) => boolean,
    ownerId = 'alice',
  ): Promise<RunplaneEvent> => {
    const stop = new AbortController();
    for await (const event of eventLog.follow({ signal: stop.signal }, { ownerId, sessionId })) {
      if (predicate(event)) {
        stop.abort();
        return event;
      }
    }
    throw new Error('the log closed');
  };

  const close = async () => {
    // Drive the simulated clock until the shutdown grace and any unwind timeouts have passed.
    let finished = false;
    const done = service.loopSessions
      .stopAll({ graceMs: 0 })
      .then(() => runtime.shutdown({ graceMs: 0 }))
      .then(() => (finished = true));
    for (let i = 0; i < 20 && !finished; i++) {
      clock.increment(1_000);
      await flush();
    }
    await done;
    service.closeStreams();
    service.close();
    sqliteLog.close();
    db.close();
    rmSync(dir, { recursive: true, force: true });
  };

  /** How many rows a table of the test database holds. */
  const countRows = (table: string): number =>
    (db.prepare(`SELECT COUNT(*) AS n FROM ${table}`).get() as { n: number }).n;

  /** How many rows of `table` belong to a session (alice's unless told). */
  const countSessionRows = (table: string, sessionId: string, ownerId = 'alice'): number =>
    (
      db
        .prepare(`SELECT COUNT(*) AS n FROM ${table} WHERE owner_id = ? AND session_id = ?`)
        .get(ownerId, sessionId) as { n: number }
    ).n;

  return {
    dir,
    sqliteLog,
    countSessionRows,
    /** The purge of the test database, forgetting purged sessions in the event log. */
    sessionPurge: () =>
      createSqliteSessionPurge({ database: db, onPurged: (key) => sqliteLog.forget(key) }),
    /** Another handle on the idempotency keys of the test database. */
    idempotencyKeys: () => createSqliteIdempotencyKeys({ database: db }),
    countRows,
    clock,
    runtime,
    service,
    runs,
    sessions,
    eventLog,
    reported,
    request,
    json,
    createSession,
    post,
    send,
    events,
    waitForEvent,
    close,
  };
}

/**
 * Reads an SSE body frame by frame. `until` resolves once the text read so far satisfies the
 * predicate (or the stream ends); `cancel` disconnects like a client that goes away.
 */
export function sseReader(response: Response) {
  if (response.body === null) throw new Error('no body');
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let text = '';
  let ended = false;
  return {
    get text() {
      return text;
    },
    get ended() {
      return ended;
    },
    /** Reads until `predicate(text)` holds or the stream ends; returns the text read so far. */
    async until(predicate: (text: string) => boolean): Promise<string> {
      while (!predicate(text) && !ended) {
        const { done, value } = await reader.read();
        if (done) ended = true;
        else text += decoder.decode(value, { stream: true });
      }
      return text;
    },
    /** The number of complete frames read so far (heartbeats included). */
    get frames(): string[] {
      return text
        .split('\n\n')
        .slice(0, -1)
        .map((frame) => `${frame}\n\n`);
    },
    cancel: () => reader.cancel(),
  };
}

/** The SSE frame the service sends for `event`, spelled out field by field (test oracle). */
export function expectedFrame(event: RunplaneEvent): string {
  return (
    `id: ${event.seq}\n` +
    `event: ${event.type}\n` +
    `data: {"seq":${event.seq},"id":"${event.id}","session_id":"${event.sessionId}",` +
    `"run_id":${event.runId === undefined ? 'null' : `"${event.runId}"`},"type":"${event.type}",` +
    `"payload":${JSON.stringify(event.payload)},"at":${event.at}}\n\n`
  );
}

/** An agent that streams `words` one per `chunkMs` on the run clock, honouring its signal. */
export function wordsAgent(words: string[], chunkMs: number): Agent<string, { reply: string }> {
  return {
    async execute(_input, ctx) {
      let reply = '';
      for (const word of words) {
        await new Promise<void>((resolve, reject) => {
          if (ctx.signal.aborted) {
            reject(ctx.signal.reason as Error);
            return;
          }
          const handle = ctx.clock.setTimeout(resolve, chunkMs);
          ctx.signal.addEventListener(
            'abort',
            () => {
              ctx.clock.clearTimeout(handle);
              reject(ctx.signal.reason as Error);
            },
            { once: true },
          );
        });
        reply += word;
        ctx.emit('agent.message_delta', { delta: word });
      }
      return { reply };
    },
  };
}
