/**
 * The SQLite {@link SessionRecords}.
 *
 * @module
 */
import type Database from 'better-sqlite3';
import type { SessionStrategy } from '../../../machines/session.machine.js';
import { RunplaneError } from '../../errors.js';
import type { SessionRecord, SessionRecords } from '../session-records.js';
import { applySqliteMigrations, type SqliteMigration } from './database.js';

/** The schema of the session records. */
export const sessionRecordMigrations: readonly SqliteMigration[] = [
  {
    id: 'session-records/1',
    sql: `
      CREATE TABLE runplane_sessions (
        owner_id TEXT NOT NULL,
        session_id TEXT NOT NULL,
        strategy TEXT NOT NULL,
        grace_ms INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        PRIMARY KEY (owner_id, session_id)
      ) WITHOUT ROWID;
    `,
  },
];

interface SessionRow {
  owner_id: string;
  session_id: string;
  strategy: string;
  grace_ms: number;
  created_at: number;
  updated_at: number;
}

const toRecord = (row: SessionRow): SessionRecord => ({
  ownerId: row.owner_id,
  sessionId: row.session_id,
  strategy: row.strategy as SessionStrategy,
  graceMs: row.grace_ms,
  createdAt: row.created_at,
  updatedAt: row.updated_at,
});

const attempt = <T>(operation: string, fn: () => T): T => {
  try {
    return fn();
  } catch (error) {
    throw new RunplaneError(
      'STORE_FAILED',
      `session records ${operation} failed: ${error instanceof Error ? error.message : String(error)}`,
      { cause: error },
    );
  }
};

/**
 * Creates the session records on an open database (see `openSqliteDatabase`).
 *
 * @param options - `database`: the open database (never closed by the records)
 * @returns the {@link SessionRecords}
 * @throws {@link RunplaneError} (`STORE_FAILED`) when the migration fails; every method throws
 *   it when a statement fails
 * @example
 * ```ts
 * const sessions = createSqliteSessionRecords({ database });
 * sessions.create({ ownerId: 'alice', sessionId: 's1', strategy: 'enqueue', graceMs: 5000, at: Date.now() });
 * ```
 */
export function createSqliteSessionRecords(options: {
  database: Database.Database;
}): SessionRecords {
  const db = options.database;
  applySqliteMigrations(db, sessionRecordMigrations);
  const insert = db.prepare<[string, string, string, number, number, number], SessionRow>(
    `INSERT INTO runplane_sessions (owner_id, session_id, strategy, grace_ms, created_at, updated_at)
     VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING *`,
  );
  const select = db.prepare<[string, string], SessionRow>(
    'SELECT * FROM runplane_sessions WHERE owner_id = ? AND session_id = ?',
  );
  const update = db.prepare<[string | null, number | null, number, string, string], SessionRow>(
    `UPDATE runplane_sessions
     SET strategy = coalesce(?, strategy), grace_ms = coalesce(?, grace_ms), updated_at = ?
     WHERE owner_id = ? AND session_id = ? RETURNING *`,
  );

  return {
    create({ ownerId, sessionId, strategy, graceMs, at }) {
      return attempt('create', () => {
        const row = insert.get(ownerId, sessionId, strategy, graceMs, at, at);
        return row === undefined ? undefined : toRecord(row);
      });
    },
    get(ownerId, sessionId) {
      return attempt('get', () => {
        const row = select.get(ownerId, sessionId);
        return row === undefined ? undefined : toRecord(row);
      });
    },
    update(ownerId, sessionId, changes, at) {
      return attempt('update', () => {
        const row = update.get(
          changes.strategy ?? null,
          changes.graceMs ?? null,
          at,
          ownerId,
          sessionId,
        );
        return row === undefined ? undefined : toRecord(row);
      });
    },
  };
}
