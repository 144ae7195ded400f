/**
 * Deleting a session's data from the one SQLite database of `runplane serve`, in small
 * batches: its event log, history, hints, run records, idempotency keys, then its record
 * (docs/architecture.md, "Data lifecycle").
 *
 * @remarks better-sqlite3 is synchronous, so a long delete would hold the event loop (and
 * every request) for its whole length. Each {@link SqliteSessionPurge.purgeStep} deletes at
 * most `batchSize` rows of one table in one transaction; the caller yields between steps
 * (`src/server/data-sweeper.ts`).
 *
 * @module
 */
import type Database from 'better-sqlite3';
import { InvalidArgumentError } from '../../errors.js';
import { storeOperations } from './database.js';
import type { SessionKey } from '../../events/event-log.js';
import type { SessionPurge } from '../session-purge.js';

/** Options of {@link createSqliteSessionPurge}. */
export interface SqliteSessionPurgeOptions {
  /**
   * The open database, on which the event log, session store, inbox, session records, run
   * records and idempotency keys were created (their tables must exist).
   */
  readonly database: Database.Database;
  /** The session store's table (`createSqliteSessionStore`'s `table`). @default 'runplane_session_messages' */
  readonly sessionMessagesTable?: string;
  /** Called once a session's rows are all gone (e.g. the event log's `forget`). */
  readonly onPurged?: (key: SessionKey) => void;
}

/** A session's data, deleted step by step (synchronous: the {@link SessionPurge} of SQLite). */
export interface SqliteSessionPurge extends SessionPurge {
  /** Sessions marked deleted whose data is not gone yet, earliest deletion first. @returns at most `limit` */
  deleted(limit: number): SessionKey[];
  /**
   * One window of sessions, the next `window` after `after` in key order: those live, with no
   * activity since `before` (clock ms: neither an event nor a settings change) and no unfinished
   * run recorded, are what retention deletes. A window reads at most `window` sessions, so one
   * call never scans the whole table. @returns the idle sessions of the window, and the key to
   * continue after (`undefined` once the window reached the last session)
   */
  idleIn(
    before: number,
    after: SessionKey,
    window: number,
  ): { idle: SessionKey[]; next: SessionKey | undefined };
  /**
   * Deletes at most `batchSize` rows of a deleted session, and of events, history or hints
   * about a megabyte of text at most (one table, one transaction); the session record goes last. @returns `true` once nothing of the session is left
   */
  purgeStep(key: SessionKey, batchSize: number): boolean;
}

const tableName = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

/**
 * About how many bytes of text one purge step deletes at most (past it, one row more): a step
 * of big rows stays short (deleting 50 MB of events in one step held requests for 0.9 s).
 */
const maxBytesPerStep = 1_048_576;

/**
 * Creates the purge on an open database.
 *
 * @param options - {@link SqliteSessionPurgeOptions}
 * @returns the {@link SqliteSessionPurge}
 * @throws `RunplaneError` (`STORE_FAILED`) when a statement cannot be prepared (a table is
 *   missing) or fails
 * @example
 * ```ts
 * const purge = createSqliteSessionPurge({ database, onPurged: (key) => eventLog.forget(key) });
 * for (const key of purge.deleted(10)) while (!purge.purgeStep(key, 500)) await yieldToRequests();
 * ```
 */
export function createSqliteSessionPurge(options: SqliteSessionPurgeOptions): SqliteSessionPurge {
  const db = options.database;
  const messages = options.sessionMessagesTable ?? 'runplane_session_messages';
  if (!tableName.test(messages)) {
    throw new InvalidArgumentError(
      'sessionMessagesTable',
      `expected \`sessionMessagesTable\` to be an SQL identifier, got ${JSON.stringify(messages)}`,
    );
  }
  const attempt = storeOperations('session purge');

  const statements = attempt('prepare', () => {
    /**
     * A batched delete of a session's rows of `table` (by the key column given): at most
     * `batchSize` rows and, when the rows have a `sized` text column, about
     * {@link maxBytesPerStep} of it (always one row at least), so that one step stays short
     * however big the rows are.
     */
    const batch = (table: string, key: string, sized?: string) => {
      const rows =
        sized === undefined
          ? `SELECT ${key} FROM ${table} WHERE owner_id = ? AND session_id = ? LIMIT ?`
          : `SELECT ${key} FROM (
               SELECT ${key}, sum(length(${sized})) OVER (ORDER BY ${key}) - length(${sized}) AS before
               FROM ${table} WHERE owner_id = ? AND session_id = ? ORDER BY ${key} LIMIT ?)
             WHERE before < ${maxBytesPerStep}`;
      return db.prepare<[string, string, string, string, number]>(
        `DELETE FROM ${table} WHERE owner_id = ? AND session_id = ? AND ${key} IN (${rows})`,
      );
    };
    return {
      steps: [
        batch('runplane_events', 'seq', 'payload'),
        batch(messages, 'seq', 'message'),
        batch('runplane_inbox', 'position', 'text'),
        batch('runplane_runs', 'run_id'),
        batch('runplane_idempotency_keys', 'key'),
        batch('runplane_event_seqs', 'session_id'),
      ],
      record: db.prepare<[string, string]>(
        'DELETE FROM runplane_sessions WHERE owner_id = ? AND session_id = ? AND deleted_at IS NOT NULL',
      ),
      deleted: db.prepare<[number], { owner_id: string; session_id: string }>(
        `SELECT owner_id, session_id FROM runplane_sessions WHERE deleted_at IS NOT NULL
         ORDER BY deleted_at LIMIT ?`,
      ),
      // A window of sessions in key order; a session's last activity is its latest event (one
      // lookup through its high-water mark) or its last settings change.
      idle: db.prepare<
        [string, string, number, number],
        { owner_id: string; session_id: string; idle: number }
      >(
        `WITH w AS (
           SELECT owner_id, session_id, updated_at, deleted_at FROM runplane_sessions
           WHERE (owner_id, session_id) > (?, ?) ORDER BY owner_id, session_id LIMIT ?)
         SELECT w.owner_id, w.session_id,
           (w.deleted_at IS NULL AND max(w.updated_at, coalesce(e.at, 0)) < ?
             AND NOT EXISTS (SELECT 1 FROM runplane_runs r
               WHERE r.owner_id = w.owner_id AND r.session_id = w.session_id
                 AND r.status IN ('CREATED', 'QUEUED', 'RUNNING'))) AS idle
         FROM w
         LEFT JOIN runplane_event_seqs q ON q.owner_id = w.owner_id AND q.session_id = w.session_id
         LEFT JOIN runplane_events e
           ON e.owner_id = q.owner_id AND e.session_id = q.session_id AND e.seq = q.last_seq
         ORDER BY w.owner_id, w.session_id`,
      ),
    };
  });

  const step = db.transaction((key: SessionKey, batchSize: number): boolean => {
    const { ownerId, sessionId } = key;
    for (const statement of statements.steps) {
      if (statement.run(ownerId, sessionId, ownerId, sessionId, batchSize).changes > 0)
        return false;
    }
    statements.record.run(ownerId, sessionId);
    return true;
  });

  const keys = (rows: Array<{ owner_id: string; session_id: string }>): SessionKey[] =>
    rows.map((row) => ({ ownerId: row.owner_id, sessionId: row.session_id }));

  return {
    deleted: (limit) => attempt('deleted', () => keys(statements.deleted.all(limit))),
    idleIn: (before, after, window) =>
      attempt('idleIn', () => {
        const rows = statements.idle.all(after.ownerId, after.sessionId, window, before);
        const last = rows.at(-1);
        return {
          idle: keys(rows.filter((row) => row.idle === 1)),
          next:
            rows.length < window || last === undefined
              ? undefined
              : { ownerId: last.owner_id, sessionId: last.session_id },
        };
      }),
    purgeStep(key, batchSize) {
      const done = attempt('purgeStep', () => step.immediate(key, batchSize));
      if (done) options.onPurged?.(key);
      return done;
    },
  };
}
