/**
 * The SQLite {@link RunRecords}.
 *
 * @module
 */
import type Database from 'better-sqlite3';
import type { RunStatus } from '../../../machines/run.machine.js';
import { RunplaneError } from '../../errors.js';
import type { RunRecord, RunRecordOutcome, RunRecords } from '../run-records.js';
import { applySqliteMigrations, type SqliteMigration } from './database.js';

/** The schema of the run records. */
export const runRecordMigrations: readonly SqliteMigration[] = [
  {
    id: 'run-records/1',
    sql: `
      CREATE TABLE runplane_runs (
        run_id TEXT PRIMARY KEY,
        owner_id TEXT NOT NULL,
        session_id TEXT NOT NULL,
        status TEXT NOT NULL,
        input TEXT NOT NULL,
        outcome TEXT,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        ended_at INTEGER
      ) WITHOUT ROWID;
      CREATE INDEX runplane_runs_unfinished ON runplane_runs (created_at)
        WHERE status IN ('CREATED', 'QUEUED', 'RUNNING');
    `,
  },
  {
    // A session's runs, for its deletion and for retention (`session-purge.ts`).
    id: 'run-records/2',
    sql: `CREATE INDEX runplane_runs_by_session ON runplane_runs (owner_id, session_id);`,
  },
];

interface RunRow {
  run_id: string;
  owner_id: string;
  session_id: string;
  status: string;
  input: string;
  outcome: string | null;
  created_at: number;
  updated_at: number;
  ended_at: number | null;
}

const storeFailed = (operation: string, cause: unknown): RunplaneError =>
  new RunplaneError(
    'STORE_FAILED',
    `run records ${operation} failed: ${cause instanceof Error ? cause.message : String(cause)}`,
    { cause },
  );

const attempt = <T>(operation: string, fn: () => T): T => {
  try {
    return fn();
  } catch (error) {
    throw storeFailed(operation, error);
  }
};

const toRecord = (row: RunRow): RunRecord => {
  let outcome: RunRecordOutcome | undefined;
  if (row.outcome !== null) {
    try {
      outcome = JSON.parse(row.outcome) as RunRecordOutcome;
    } catch (error) {
      throw storeFailed(`read (run ${row.run_id} has an outcome that is not JSON)`, error);
    }
  }
  return {
    runId: row.run_id,
    ownerId: row.owner_id,
    sessionId: row.session_id,
    status: row.status as RunStatus,
    input: row.input,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    endedAt: row.ended_at ?? undefined,
    outcome,
  };
};

/**
 * Creates the run records on an open database (see `openSqliteDatabase`).
 *
 * @remarks Once a row holds a terminal status, `setStatus` no longer changes it; `finish`
 * only fills in the outcome of a terminal row (the first terminal status wins, as in the run
 * machine).
 *
 * @param options - `database`: the open database (never closed by the records)
 * @returns the {@link RunRecords}
 * @throws {@link RunplaneError} (`STORE_FAILED`) when the migration fails; every method throws
 *   it when a statement fails
 * @example
 * ```ts
 * const runs = createSqliteRunRecords({ database: openSqliteDatabase({ path: 'runplane.db' }) });
 * ```
 */
export function createSqliteRunRecords(options: { database: Database.Database }): RunRecords {
  const db = options.database;
  applySqliteMigrations(db, runRecordMigrations);
  const insert = db.prepare<[string, string, string, string, number, number]>(
    `INSERT INTO runplane_runs (run_id, owner_id, session_id, status, input, created_at, updated_at)
     VALUES (?, ?, ?, 'CREATED', ?, ?, ?)`,
  );
  const updateStatus = db.prepare<[string, number, number | null, string]>(
    `UPDATE runplane_runs SET status = ?, updated_at = ?, ended_at = coalesce(ended_at, ?)
     WHERE run_id = ? AND status IN ('CREATED', 'QUEUED', 'RUNNING')`,
  );
  const updateOutcome = db.prepare<[string, string, number, number, string, string]>(
    `UPDATE runplane_runs
     SET status = CASE WHEN status IN ('CREATED', 'QUEUED', 'RUNNING') THEN ? ELSE status END,
         outcome = ?, updated_at = ?, ended_at = coalesce(ended_at, ?)
     WHERE run_id = ? AND outcome IS NULL
       AND (status IN ('CREATED', 'QUEUED', 'RUNNING') OR status = ?)`,
  );
  const select = db.prepare<[string, string], RunRow>(
    'SELECT * FROM runplane_runs WHERE run_id = ? AND owner_id = ?',
  );
  const selectUnfinished = db.prepare<[], RunRow>(
    `SELECT * FROM runplane_runs WHERE status IN ('CREATED', 'QUEUED', 'RUNNING')
     ORDER BY created_at, run_id`,
  );
  const terminal = new Set<RunStatus>(['COMPLETED', 'FAILED', 'CANCELLED']);

  return {
    create({ runId, ownerId, sessionId, input, at }) {
      attempt('create', () => insert.run(runId, ownerId, sessionId, input, at, at));
    },
    setStatus(runId, status, at) {
      return attempt(
        'setStatus',
        () => updateStatus.run(status, at, terminal.has(status) ? at : null, runId).changes > 0,
      );
    },
    finish(runId, outcome, at) {
      return attempt(
        'finish',
        () =>
          updateOutcome.run(outcome.status, JSON.stringify(outcome), at, at, runId, outcome.status)
            .changes > 0,
      );
    },
    get(ownerId, runId) {
      return attempt('get', () => {
        const row = select.get(runId, ownerId);
        return row === undefined ? undefined : toRecord(row);
      });
    },
    listUnfinished() {
      return attempt('listUnfinished', () => selectUnfinished.all().map(toRecord));
    },
  };
}
