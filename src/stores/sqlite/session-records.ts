/**
 * The SQLite {@link SessionRecords}.
 *
 * @module
 */
import type Database from 'better-sqlite3';
import type { SessionStrategy } from '../../../machines/session.machine.js';
import type {
  FailoverPolicy,
  SessionCursor,
  SessionMode,
  SessionRecord,
  SessionRecords,
} from '../session-records.js';
import { applySqliteMigrations, storeOperations, type SqliteMigration } from './database.js';

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
  {
    // Deletion is a mark first (the session is gone for every request at once), then a purge
    // in batches (`session-purge.ts`); the list is read newest first through an index.
    id: 'session-records/2',
    sql: `
      ALTER TABLE runplane_sessions ADD COLUMN deleted_at INTEGER;
      ALTER TABLE runplane_sessions ADD COLUMN approval_timeout_ms INTEGER;
      CREATE INDEX runplane_sessions_by_age ON runplane_sessions (owner_id, created_at, session_id)
        WHERE deleted_at IS NULL;
      CREATE INDEX runplane_sessions_deleted ON runplane_sessions (deleted_at)
        WHERE deleted_at IS NOT NULL;
    `,
  },
  {
    // Loop sessions (a TurnLoop per session), found on start to be resumed.
    id: 'session-records/3',
    sql: `
      ALTER TABLE runplane_sessions ADD COLUMN mode TEXT NOT NULL DEFAULT 'runs';
      CREATE INDEX runplane_sessions_loops ON runplane_sessions (created_at)
        WHERE mode = 'loop' AND deleted_at IS NULL;
    `,
  },
  {
    // Whether a loop session's loop may owe an answer (a message logged that no settled loop
    // has answered): only those are rebuilt when the service starts, the others on first touch.
    // Sessions from before this column may owe: they are read once on the next start.
    id: 'session-records/4',
    sql: `
      ALTER TABLE runplane_sessions ADD COLUMN loop_owes INTEGER NOT NULL DEFAULT 1;
      CREATE INDEX runplane_sessions_owing_loops ON runplane_sessions (created_at)
        WHERE mode = 'loop' AND deleted_at IS NULL AND loop_owes = 1;
    `,
  },
  {
    // The failover policy of a cluster (README "Cluster"); sessions from before it are `mark`.
    id: 'session-records/5',
    sql: `ALTER TABLE runplane_sessions ADD COLUMN failover TEXT NOT NULL DEFAULT 'mark';`,
  },
];

interface SessionRow {
  owner_id: string;
  session_id: string;
  strategy: string;
  mode: string;
  grace_ms: number;
  approval_timeout_ms: number | null;
  failover: string;
  created_at: number;
  updated_at: number;
}

const toRecord = (row: SessionRow): SessionRecord => ({
  ownerId: row.owner_id,
  sessionId: row.session_id,
  mode: row.mode as SessionMode,
  strategy: row.strategy as SessionStrategy,
  graceMs: row.grace_ms,
  approvalTimeoutMs: row.approval_timeout_ms ?? undefined,
  failover: row.failover as FailoverPolicy,
  createdAt: row.created_at,
  updatedAt: row.updated_at,
});

const attempt = storeOperations('session records');

/**
 * Creates the session records on an open database (see `openSqliteDatabase`).
 *
 * @param options - `database`: the open database (never closed by the records)
 * @returns the {@link SessionRecords}
 * @throws `RunplaneError` (`STORE_FAILED`) when the migration fails; every method throws
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
  const insert = db.prepare<
    [string, string, string, string, number, number | null, string, number, number],
    SessionRow
  >(
    `INSERT INTO runplane_sessions
       (owner_id, session_id, strategy, mode, grace_ms, approval_timeout_ms, failover,
        created_at, updated_at, loop_owes)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0) ON CONFLICT DO NOTHING RETURNING *`,
  );
  const selectOwingLoops = db.prepare<[], { owner_id: string; session_id: string }>(
    `SELECT owner_id, session_id FROM runplane_sessions
     WHERE mode = 'loop' AND deleted_at IS NULL AND loop_owes = 1 ORDER BY created_at`,
  );
  const markOwes = db.prepare<[number, string, string]>(
    `UPDATE runplane_sessions SET loop_owes = ?
     WHERE owner_id = ? AND session_id = ? AND mode = 'loop'`,
  );
  const selectLoops = db.prepare<[], { owner_id: string; session_id: string }>(
    `SELECT owner_id, session_id FROM runplane_sessions
     WHERE mode = 'loop' AND deleted_at IS NULL ORDER BY created_at`,
  );
  const select = db.prepare<[string, string], SessionRow>(
    'SELECT * FROM runplane_sessions WHERE owner_id = ? AND session_id = ? AND deleted_at IS NULL',
  );
  const update = db.prepare<
    [string | null, number | null, number | null, string | null, number, string, string],
    SessionRow
  >(
    `UPDATE runplane_sessions
     SET strategy = coalesce(?, strategy), grace_ms = coalesce(?, grace_ms),
         approval_timeout_ms = coalesce(?, approval_timeout_ms),
         failover = coalesce(?, failover), updated_at = ?
     WHERE owner_id = ? AND session_id = ? AND deleted_at IS NULL RETURNING *`,
  );
  const selectFirstPage = db.prepare<[string, number], SessionRow>(
    `SELECT * FROM runplane_sessions WHERE owner_id = ? AND deleted_at IS NULL
     ORDER BY created_at DESC, session_id DESC LIMIT ?`,
  );
  const selectPage = db.prepare<[string, number, number, string, number], SessionRow>(
    `SELECT * FROM runplane_sessions WHERE owner_id = ? AND deleted_at IS NULL
       AND (created_at < ? OR (created_at = ? AND session_id < ?))
     ORDER BY created_at DESC, session_id DESC LIMIT ?`,
  );
  const countLive = db.prepare<[string], { n: number }>(
    'SELECT COUNT(*) AS n FROM runplane_sessions WHERE owner_id = ? AND deleted_at IS NULL',
  );
  const markDeleted = db.prepare<[number, string, string]>(
    `UPDATE runplane_sessions SET deleted_at = ?
     WHERE owner_id = ? AND session_id = ? AND deleted_at IS NULL`,
  );
  const page = (ownerId: string, after: SessionCursor | undefined, limit: number) =>
    after === undefined
      ? selectFirstPage.all(ownerId, limit)
      : selectPage.all(ownerId, after.createdAt, after.createdAt, after.sessionId, limit);

  return {
    create({ ownerId, sessionId, strategy, graceMs, approvalTimeoutMs, mode, failover, at }) {
      return attempt('create', () => {
        const row = insert.get(
          ownerId,
          sessionId,
          strategy,
          mode ?? 'runs',
          graceMs,
          approvalTimeoutMs ?? null,
          failover ?? 'mark',
          at,
          at,
        );
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
          changes.approvalTimeoutMs ?? null,
          changes.failover ?? null,
          at,
          ownerId,
          sessionId,
        );
        return row === undefined ? undefined : toRecord(row);
      });
    },
    list(ownerId, { after, limit }) {
      return attempt('list', () => page(ownerId, after, limit).map(toRecord));
    },
    listLoops(filter) {
      return attempt('listLoops', () =>
        (filter?.owing === true ? selectOwingLoops : selectLoops)
          .all()
          .map((row) => ({ ownerId: row.owner_id, sessionId: row.session_id })),
      );
    },
    markLoopOwes(ownerId, sessionId, owes) {
      attempt('markLoopOwes', () => markOwes.run(owes ? 1 : 0, ownerId, sessionId));
    },
    count(ownerId) {
      return attempt('count', () => countLive.get(ownerId)?.n ?? 0);
    },
    markDeleted(ownerId, sessionId, at) {
      return attempt('markDeleted', () => markDeleted.run(at, ownerId, sessionId).changes > 0);
    },
  };
}
