/**
 * The SQLite {@link Inbox}: hints wait in a table, so a supplement pushed before a crash is
 * still read after the restart.
 *
 * @module
 */
import type Database from 'better-sqlite3';
import { InvalidArgumentError, RunplaneError } from '../../errors.js';
import type { Hint, Inbox } from '../../inbox/inbox.js';
import { applySqliteMigrations, openSqliteDatabase, type SqliteMigration } from './database.js';

/** Options of {@link createSqliteInbox}: give `path` or an open `database`. */
export interface SqliteInboxOptions {
  /** A database file path (created when missing), or `':memory:'`. */
  readonly path?: string;
  /** An open database to share (see `openSqliteDatabase`); the inbox then never closes it. */
  readonly database?: Database.Database;
}

/** An {@link Inbox} on SQLite; `close()` closes the database it opened. */
export interface SqliteInbox extends Inbox {
  /** Closes the database when the inbox opened it (a no-op for a shared `database`). */
  close(): void;
}

/** The schema of the inbox. */
export const inboxMigrations: readonly SqliteMigration[] = [
  {
    id: 'inbox/1',
    sql: `
      CREATE TABLE runplane_inbox (
        position INTEGER PRIMARY KEY AUTOINCREMENT,
        owner_id TEXT NOT NULL,
        session_id TEXT NOT NULL,
        id TEXT NOT NULL,
        text TEXT NOT NULL,
        source TEXT NOT NULL,
        at INTEGER NOT NULL
      );
      CREATE INDEX runplane_inbox_by_session ON runplane_inbox (owner_id, session_id, position);
    `,
  },
];

const storeFailed = (operation: string, cause: unknown): RunplaneError =>
  new RunplaneError(
    'STORE_FAILED',
    `inbox ${operation} failed: ${cause instanceof Error ? cause.message : String(cause)}`,
    { cause },
  );

/**
 * Creates an inbox on SQLite: one FIFO of hints per (ownerId, sessionId).
 *
 * @remarks Synchronous like every {@link Inbox}; `drain` reads and deletes in one transaction,
 * so a hint is handed to exactly one reasoning step.
 *
 * @param options - {@link SqliteInboxOptions}
 * @returns the inbox, with `close()`
 * @throws {@link InvalidArgumentError} (`INVALID_ARGUMENT`) when neither or both of `path` and
 *   `database` are given
 * @throws {@link RunplaneError} (`STORE_FAILED`) when the database cannot be opened or
 *   migrated; `push`, `drain` and `size` throw it when a statement fails
 * @example
 * ```ts
 * const runtime = createRuntime({ stores: { inbox: createSqliteInbox({ database }) } });
 * ```
 */
export function createSqliteInbox(options: SqliteInboxOptions): SqliteInbox {
  if ((options.path === undefined) === (options.database === undefined)) {
    throw new InvalidArgumentError(
      'options',
      'expected `options` to be exactly one of `path` and `database`, got ' +
        (options.path === undefined ? 'neither' : 'both'),
    );
  }
  const owned = options.database === undefined;
  const db = options.database ?? openSqliteDatabase({ path: options.path ?? '' });
  applySqliteMigrations(db, inboxMigrations);
  const insert = db.prepare<[string, string, string, string, string, number]>(
    `INSERT INTO runplane_inbox (owner_id, session_id, id, text, source, at)
     VALUES (?, ?, ?, ?, ?, ?)`,
  );
  const selectAll = db.prepare<[string, string], Hint>(
    `SELECT id, text, source, at FROM runplane_inbox WHERE owner_id = ? AND session_id = ?
     ORDER BY position`,
  );
  const deleteAll = db.prepare<[string, string]>(
    'DELETE FROM runplane_inbox WHERE owner_id = ? AND session_id = ?',
  );
  const count = db.prepare<[string, string], { n: number }>(
    'SELECT COUNT(*) AS n FROM runplane_inbox WHERE owner_id = ? AND session_id = ?',
  );
  const drainTx = db.transaction((ownerId: string, sessionId: string): Hint[] => {
    const hints = selectAll.all(ownerId, sessionId).map((row) => ({ ...row }));
    if (hints.length > 0) deleteAll.run(ownerId, sessionId);
    return hints;
  });

  return {
    push(_ctx, key, hint) {
      try {
        insert.run(key.ownerId, key.sessionId, hint.id, hint.text, hint.source, hint.at);
      } catch (error) {
        throw storeFailed('push', error);
      }
    },
    drain(_ctx, key) {
      try {
        return drainTx(key.ownerId, key.sessionId);
      } catch (error) {
        throw storeFailed('drain', error);
      }
    },
    size(_ctx, key) {
      try {
        return count.get(key.ownerId, key.sessionId)?.n ?? 0;
      } catch (error) {
        throw storeFailed('size', error);
      }
    },
    close() {
      if (owned && db.open) db.close();
    },
  };
}
