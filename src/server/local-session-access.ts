/**
 * The single-instance {@link SessionAccess}: sessions reached in this process, through the
 * runtime and the record stores (SQLite or memory), exactly as the routes used them before the
 * seam (docs/architecture.md, "Cluster on Redis"). A command runs here at once, in one step of
 * the event loop up to its first wait (`session.delete` then waits for the session's runs).
 *
 * @module
 */
import type { IdempotencyKeys } from '../stores/idempotency-keys.js';
import type { RunRecords } from '../stores/run-records.js';
import type { SessionRecords } from '../stores/session-records.js';
import { HttpError } from './http-error.js';
import type { IdempotencyKeyAccess, SessionAccess, SessionCommand } from './session-access.js';
import {
  createSession,
  deleteSession,
  updateSession,
  viewSession,
  type SessionCommandsContext,
} from './session-commands.js';
import { applySessionEvents, type SessionEventsContext } from './session-events.js';

/** What the single-instance access needs: the contexts of the session and event rules. */
export interface LocalSessionAccessOptions
  extends Omit<SessionCommandsContext, 'idempotencyKeys'>, SessionEventsContext {
  /** Where runs are recorded. */
  readonly runs: RunRecords;
  /** Where sessions are kept. */
  readonly sessions: SessionRecords;
  /** Where `Idempotency-Key` answers are kept. */
  readonly idempotencyKeys: IdempotencyKeys;
}

/** Runs `fn` now; its value, or what it threw, as a promise (a store failure is a rejection). */
const now = <T>(fn: () => T): Promise<T> => new Promise<T>((resolve) => resolve(fn()));

/**
 * The asynchronous face of a synchronous idempotency-key store: each call runs at once; a
 * store failure becomes a rejection.
 *
 * @param store - e.g. `createSqliteIdempotencyKeys(...)` or `createMemoryIdempotencyKeys()`
 * @returns the {@link IdempotencyKeyAccess}
 */
export function toIdempotencyKeyAccess(store: IdempotencyKeys): IdempotencyKeyAccess {
  return {
    begin: (request) => now(() => store.begin(request)),
    complete: (ownerId, key, answer) => now(() => store.complete(ownerId, key, answer)),
    release: (ownerId, key) => now(() => store.release(ownerId, key)),
    forgetSession: (ownerId, sessionId) => now(() => store.forgetSession(ownerId, sessionId)),
  };
}

/**
 * Creates the single-instance {@link SessionAccess}.
 *
 * @param options - {@link LocalSessionAccessOptions}
 * @returns the access every route of this process uses (unless `ServiceOptions.sessionAccess`
 *   wraps it)
 */
export function createLocalSessionAccess(options: LocalSessionAccessOptions): SessionAccess {
  const { runtime, sessions, runs } = options;
  const eventLog = runtime.eventLog;
  const idempotencyKeys = toIdempotencyKeyAccess(options.idempotencyKeys);
  const commands: SessionCommandsContext = { ...options, idempotencyKeys };

  const applyEvents = (command: Extract<SessionCommand, { type: 'session.apply_events' }>) => {
    // Looked up in the same step as the events are applied: a session deleted (or changed)
    // while the request was on its way never gets a new run.
    const session = sessions.get(command.ownerId, command.sessionId);
    if (session === undefined) {
      throw new HttpError(
        'not_found',
        `session ${JSON.stringify(command.sessionId)} was not found`,
      );
    }
    return { results: applySessionEvents(options, session, command.events) };
  };

  const execute = async (command: SessionCommand) => {
    switch (command.type) {
      case 'session.create':
        return createSession(commands, command);
      case 'session.update':
        return updateSession(commands, command);
      case 'session.delete':
        return await deleteSession(commands, command);
      case 'session.apply_events':
        return applyEvents(command);
    }
  };

  return {
    findSession: (ownerId, sessionId) => now(() => sessions.get(ownerId, sessionId)),
    listSessions: (ownerId, page) => now(() => sessions.list(ownerId, page)),
    viewSession: (session) => now(() => viewSession(commands, session)),
    getRun: (ownerId, runId) =>
      now(() => {
        const found = runs.get(ownerId, runId);
        if (found === undefined || sessions.get(found.ownerId, found.sessionId) === undefined) {
          return undefined;
        }
        const live = runtime.runs.find(found.ownerId, found.sessionId, found.runId);
        return live === undefined ? found : { ...found, status: live.status };
      }),
    events: {
      read: (ctx, key, readOptions) => eventLog.read(ctx, key, readOptions),
      follow: (ctx, key, readOptions) => eventLog.follow(ctx, key, readOptions),
      lastSeq: (ctx, key) => now(() => eventLog.lastSeq(ctx, key)),
    },
    idempotencyKeys,
    execute: execute as SessionAccess['execute'],
  };
}
