/**
 * The SQLite {@link EventLog}: per-session `seq` from a counter row, so it survives restarts
 * and never rewinds (DESIGN.md §10).
 *
 * @module
 */
import type Database from 'better-sqlite3';
import { createEventId } from '../../ids.js';
import { InvalidArgumentError, RunplaneError } from '../../errors.js';
import type {
  EventLog,
  NewEvent,
  ReadOptions,
  RunplaneEvent,
  SessionKey,
} from '../../events/event-log.js';
import { applySqliteMigrations, openSqliteDatabase, type SqliteMigration } from './database.js';

/** Options of {@link createSqliteEventLog}: give `path` or an open `database`. */
export interface SqliteEventLogOptions {
  /** A database file path (created when missing), or `':memory:'`. */
  readonly path?: string;
  /** An open database to share (see `openSqliteDatabase`); the log then never closes it. */
  readonly database?: Database.Database;
  /** How many events one query of `follow` reads at most; a positive integer. @default 256 */
  readonly followBatchSize?: number;
}

/** An {@link EventLog} on SQLite; `close()` closes the database it opened. */
export interface SqliteEventLog extends EventLog {
  /** Ends every `follow` iterator and closes the database when the log opened it. */
  close(): void;
}

/** The schema of the event log. */
export const eventLogMigrations: readonly SqliteMigration[] = [
  {
    id: 'event-log/1',
    sql: `
      CREATE TABLE runplane_event_seqs (
        owner_id TEXT NOT NULL,
        session_id TEXT NOT NULL,
        last_seq INTEGER NOT NULL,
        PRIMARY KEY (owner_id, session_id)
      ) WITHOUT ROWID;
      CREATE TABLE runplane_events (
        owner_id TEXT NOT NULL,
        session_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        id TEXT NOT NULL,
        run_id TEXT,
        type TEXT NOT NULL,
        payload TEXT NOT NULL,
        at INTEGER NOT NULL,
        PRIMARY KEY (owner_id, session_id, seq)
      ) WITHOUT ROWID;
      CREATE INDEX runplane_events_by_run ON runplane_events (owner_id, session_id, run_id)
        WHERE run_id IS NOT NULL;
    `,
  },
];

interface EventRow {
  seq: number;
  id: string;
  run_id: string | null;
  type: string;
  payload: string;
  at: number;
}

const keyOf = (key: SessionKey) => `${key.ownerId}\u0000${key.sessionId}`;

const storeFailed = (operation: string, cause: unknown): RunplaneError =>
  cause instanceof RunplaneError
    ? cause
    : new RunplaneError(
        'STORE_FAILED',
        `event log ${operation} failed: ${cause instanceof Error ? cause.message : String(cause)}`,
        { cause },
      );

/** JSON of a payload; one that cannot be serialized is logged as a note saying so, never lost. */
const payloadJson = (payload: Readonly<Record<string, unknown>>): string => {
  try {
    return JSON.stringify(payload);
  } catch (error) {
    return JSON.stringify({
      unserializable: error instanceof Error ? error.message : String(error),
    });
  }
};

/**
 * Creates an event log on SQLite.
 *
 * @remarks `append` is one transaction: bump the session's counter row
 * (`runplane_event_seqs`), insert the event. The counter is never decremented, so `seq` stays
 * strictly increasing across restarts and even if old events are deleted. `follow` replays
 * from the table, then sleeps until an `append` of this log wakes it (one process writes a
 * database; a second writer process is not supported).
 *
 * @param options - {@link SqliteEventLogOptions}
 * @returns the log, with `close()`
 * @throws {@link InvalidArgumentError} (`INVALID_ARGUMENT`) when neither or both of `path` and
 *   `database` are given, or for a bad `followBatchSize`
 * @throws {@link RunplaneError} (`STORE_FAILED`) when the database cannot be opened or migrated;
 *   `append` and `read` throw (reject) with it when a statement fails
 * @example
 * ```ts
 * const database = openSqliteDatabase({ path: '.runplane/runplane.db' });
 * const runtime = createRuntime({ stores: { eventLog: createSqliteEventLog({ database }) } });
 * ```
 */
export function createSqliteEventLog(options: SqliteEventLogOptions): SqliteEventLog {
  if ((options.path === undefined) === (options.database === undefined)) {
    throw new InvalidArgumentError(
      'options',
      'expected `options` to be exactly one of `path` and `database`, got ' +
        (options.path === undefined ? 'neither' : 'both'),
    );
  }
  const batchSize = options.followBatchSize ?? 256;
  if (!Number.isInteger(batchSize) || batchSize < 1) {
    throw new InvalidArgumentError(
      'followBatchSize',
      `expected \`followBatchSize\` to be a positive integer, got ${String(batchSize)}`,
    );
  }
  const owned = options.database === undefined;
  const db = options.database ?? openSqliteDatabase({ path: options.path ?? '' });
  applySqliteMigrations(db, eventLogMigrations);

  const bumpSeq = db.prepare<[string, string], { last_seq: number }>(
    `INSERT INTO runplane_event_seqs (owner_id, session_id, last_seq) VALUES (?, ?, 1)
     ON CONFLICT (owner_id, session_id) DO UPDATE SET last_seq = last_seq + 1
     RETURNING last_seq`,
  );
  const insert = db.prepare<
    [string, string, number, string, string | null, string, string, number]
  >(
    `INSERT INTO runplane_events (owner_id, session_id, seq, id, run_id, type, payload, at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
  );
  const select = db.prepare<
    {
      owner: string;
      session: string;
      after: number;
      runId: string | null;
      types: string | null;
      limit: number;
    },
    EventRow
  >(
    `SELECT seq, id, run_id, type, payload, at FROM runplane_events
     WHERE owner_id = @owner AND session_id = @session AND seq > @after
       AND (@runId IS NULL OR run_id = @runId)
       AND (@types IS NULL OR type IN (SELECT value FROM json_each(@types)))
     ORDER BY seq LIMIT @limit`,
  );
  const selectLastSeq = db.prepare<[string, string], { last_seq: number }>(
    'SELECT last_seq FROM runplane_event_seqs WHERE owner_id = ? AND session_id = ?',
  );
  const selectRun = db.prepare<[string, string, string], { one: number }>(
    `SELECT 1 AS one FROM runplane_events WHERE owner_id = ? AND session_id = ? AND run_id = ?
     LIMIT 1`,
  );
  const appendTx = db.transaction((key: SessionKey, event: NewEvent, id: string): number => {
    const seq = bumpSeq.get(key.ownerId, key.sessionId)?.last_seq;
    if (seq === undefined) throw new Error('the sequence counter returned no row');
    insert.run(
      key.ownerId,
      key.sessionId,
      seq,
      id,
      event.runId ?? null,
      event.type,
      payloadJson(event.payload ?? {}),
      event.at,
    );
    return seq;
  });

  const waiters = new Map<string, Set<() => void>>();
  const closing = new AbortController();

  const toEvent = (sessionId: string, row: EventRow): RunplaneEvent => {
    let payload: Record<string, unknown>;
    try {
      payload = JSON.parse(row.payload) as Record<string, unknown>;
    } catch (error) {
      throw storeFailed(`read (event ${row.seq} has a payload that is not JSON)`, error);
    }
    return {
      seq: row.seq,
      id: row.id,
      sessionId,
      runId: row.run_id ?? undefined,
      type: row.type,
      payload,
      at: row.at,
    };
  };

  const readSync = (key: SessionKey, options: ReadOptions, limit: number): RunplaneEvent[] => {
    try {
      return select
        .all({
          owner: key.ownerId,
          session: key.sessionId,
          after: options.after ?? 0,
          runId: options.runId ?? null,
          types: options.types === undefined ? null : JSON.stringify(options.types),
          limit,
        })
        .map((row) => toEvent(key.sessionId, row));
    } catch (error) {
      throw storeFailed('read', error);
    }
  };

  const lastSeqOf = (key: SessionKey): number => {
    try {
      return selectLastSeq.get(key.ownerId, key.sessionId)?.last_seq ?? 0;
    } catch (error) {
      throw storeFailed('lastSeq', error);
    }
  };

  /** Resolves on the next append to `key`, or when `signal` aborts or the log closes. */
  const nextAppend = (key: string, signal: AbortSignal | undefined): Promise<void> =>
    new Promise<void>((resolve) => {
      let set = waiters.get(key);
      if (set === undefined) waiters.set(key, (set = new Set()));
      const waiters_ = set;
      const wake = () => {
        signal?.removeEventListener('abort', wake);
        closing.signal.removeEventListener('abort', wake);
        waiters_.delete(wake);
        if (waiters_.size === 0 && waiters.get(key) === waiters_) waiters.delete(key);
        resolve();
      };
      waiters_.add(wake);
      signal?.addEventListener('abort', wake, { once: true });
      closing.signal.addEventListener('abort', wake, { once: true });
    });

  return {
    append(_ctx, key, event) {
      const id = createEventId();
      let seq: number;
      try {
        seq = appendTx(key, event, id);
      } catch (error) {
        throw storeFailed('append', error);
      }
      const set = waiters.get(keyOf(key));
      if (set !== undefined) for (const wake of [...set]) wake();
      return {
        seq,
        id,
        sessionId: key.sessionId,
        runId: event.runId,
        type: event.type,
        payload: event.payload ?? {},
        at: event.at,
      };
    },

    read(_ctx, key, readOptions = {}) {
      try {
        return Promise.resolve(
          readSync(key, readOptions, readOptions.limit ?? Number.MAX_SAFE_INTEGER),
        );
      } catch (error) {
        return Promise.reject(storeFailed('read', error));
      }
    },

    async *follow(ctx, key, followOptions = {}) {
      const signal = ctx.signal;
      const k = keyOf(key);
      let after = followOptions.after ?? 0;
      const stopped = () => signal?.aborted === true || closing.signal.aborted;
      while (!stopped()) {
        const upTo = lastSeqOf(key);
        while (after < upTo && !stopped()) {
          const batch = readSync(key, { ...followOptions, after }, batchSize);
          for (const event of batch) {
            after = event.seq;
            yield event;
            if (stopped()) return;
          }
          // A short batch read every match there was: everything up to `upTo` was seen.
          if (batch.length < batchSize) after = Math.max(after, upTo);
        }
        if (stopped()) return;
        if (lastSeqOf(key) > after) continue;
        await nextAppend(k, signal);
      }
    },

    hasRun(_ctx, key, runId) {
      try {
        return selectRun.get(key.ownerId, key.sessionId, runId) !== undefined;
      } catch (error) {
        throw storeFailed('hasRun', error);
      }
    },

    lastSeq(_ctx, key) {
      return lastSeqOf(key);
    },

    close() {
      closing.abort();
      if (owned && db.open) db.close();
    },
  };
}
