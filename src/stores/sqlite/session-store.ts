/**
 * The SQLite {@link SessionStore}, on better-sqlite3 (the embedded default, docs/architecture.md, "Checkpoints and stores").
 *
 * @module
 */
import Database from 'better-sqlite3';
import { chatMessageSchema, type ChatMessage } from '../../agent/messages.js';
import { InvalidArgumentError, RunplaneError } from '../../errors.js';
import type { SessionStore } from '../session-store.js';

/** Options of {@link createSqliteSessionStore}: give `path` or an open `database`. */
export interface SqliteSessionStoreOptions {
  /** A database file path (created when missing), or `':memory:'`. */
  readonly path?: string;
  /** An open better-sqlite3 database to share (the store then never closes it). */
  readonly database?: Database.Database;
  /** Name of the table that holds the messages. @default 'runplane_session_messages' */
  readonly table?: string;
}

/** A {@link SessionStore} on SQLite; `close()` closes the database it opened. */
export interface SqliteSessionStore extends SessionStore {
  /** Closes the database when the store opened it (a no-op for a shared `database`). */
  close(): void;
}

const tableName = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

const storeFailed = (operation: string, cause: unknown): RunplaneError =>
  new RunplaneError(
    'STORE_FAILED',
    `session store ${operation} failed: ${cause instanceof Error ? cause.message : String(cause)}`,
    { cause },
  );

/**
 * Creates a session store on SQLite. One row per message, ordered by a per-session sequence;
 * an append is one transaction, so a run's messages are stored all or none.
 *
 * @remarks better-sqlite3 is synchronous: each call runs to completion before its promise
 * settles. Pragma `journal_mode = WAL` is set on a database the store opens itself.
 *
 * @param options - {@link SqliteSessionStoreOptions}
 * @returns the store, with `close()`
 * @throws {@link InvalidArgumentError} (`INVALID_ARGUMENT`) when neither or both of `path` and
 *   `database` are given, or for a bad `table`
 * @throws {@link RunplaneError} (`STORE_FAILED`) when the database cannot be opened
 * @example
 * ```ts
 * import { createSqliteSessionStore } from 'runplane/stores/sqlite';
 * const sessionStore = createSqliteSessionStore({ path: '.runplane/sessions.db' });
 * const runtime = createRuntime({ stores: { sessionStore } });
 * ```
 */
export function createSqliteSessionStore(options: SqliteSessionStoreOptions): SqliteSessionStore {
  if ((options.path === undefined) === (options.database === undefined)) {
    throw new InvalidArgumentError(
      'options',
      'expected `options` to be exactly one of `path` and `database`, got ' +
        (options.path === undefined ? 'neither' : 'both'),
    );
  }
  if (options.path !== undefined && (typeof options.path !== 'string' || options.path === '')) {
    throw new InvalidArgumentError(
      'path',
      `expected \`path\` to be a non-empty string, got ${String(options.path)}`,
    );
  }
  const table = options.table ?? 'runplane_session_messages';
  if (!tableName.test(table)) {
    throw new InvalidArgumentError(
      'table',
      `expected \`table\` to be an SQL identifier, got ${JSON.stringify(table)}`,
    );
  }
  const owned = options.database === undefined;
  let db: Database.Database;
  try {
    db = options.database ?? new Database(options.path);
    if (owned && options.path !== ':memory:') db.pragma('journal_mode = WAL');
    db.exec(
      `CREATE TABLE IF NOT EXISTS ${table} (
        owner_id TEXT NOT NULL,
        session_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        message TEXT NOT NULL,
        PRIMARY KEY (owner_id, session_id, seq)
      ) WITHOUT ROWID`,
    );
  } catch (error) {
    throw storeFailed('open', error);
  }
  const selectAll = db.prepare<[string, string], { seq: number; message: string }>(
    `SELECT seq, message FROM ${table} WHERE owner_id = ? AND session_id = ? ORDER BY seq`,
  );
  const selectLast = db.prepare<[string, string], { last: number | null }>(
    `SELECT MAX(seq) AS last FROM ${table} WHERE owner_id = ? AND session_id = ?`,
  );
  const insert = db.prepare<[string, string, number, string]>(
    `INSERT INTO ${table} (owner_id, session_id, seq, message) VALUES (?, ?, ?, ?)`,
  );
  const deleteAll = db.prepare<[string, string]>(
    `DELETE FROM ${table} WHERE owner_id = ? AND session_id = ?`,
  );
  const appendAll = db.transaction(
    (ownerId: string, sessionId: string, messages: readonly ChatMessage[]) => {
      let seq = selectLast.get(ownerId, sessionId)?.last ?? 0;
      for (const message of messages)
        insert.run(ownerId, sessionId, ++seq, JSON.stringify(message));
    },
  );

  const attempt = <T>(operation: string, fn: () => T): Promise<T> => {
    try {
      return Promise.resolve(fn());
    } catch (error) {
      return Promise.reject(error instanceof RunplaneError ? error : storeFailed(operation, error));
    }
  };

  return {
    load(_ctx, key) {
      return attempt('load', () =>
        selectAll.all(key.ownerId, key.sessionId).map((row) => {
          let parsed: unknown;
          try {
            parsed = JSON.parse(row.message);
          } catch (error) {
            throw storeFailed(`load (message ${row.seq} is not JSON)`, error);
          }
          const result = chatMessageSchema.safeParse(parsed);
          if (!result.success) {
            throw storeFailed(`load (message ${row.seq} is not a chat message)`, result.error);
          }
          return result.data;
        }),
      );
    },
    append(_ctx, key, messages) {
      return attempt('append', () => appendAll(key.ownerId, key.sessionId, messages));
    },
    clear(_ctx, key) {
      return attempt('clear', () => void deleteAll.run(key.ownerId, key.sessionId));
    },
    close() {
      if (owned && db.open) db.close();
    },
  };
}
