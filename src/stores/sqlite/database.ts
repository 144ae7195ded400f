/**
 * One SQLite database for every runplane store: opened once, in WAL mode, with named
 * migrations that each store applies for itself.
 *
 * @remarks Stores take an open `database` so that the event log, the session histories, the
 * inbox, run records and checkpoints share one file (`./.runplane/runplane.db` for
 * `runplane serve`) and one writer connection.
 *
 * @module
 */
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { InvalidArgumentError, RunplaneError } from '../../errors.js';

/** One schema change, applied once per database and recorded by `id`. */
export interface SqliteMigration {
  /** A unique, stable name, e.g. `'events/1'`; never rename or edit an applied one. */
  readonly id: string;
  /** The SQL statements to run (one transaction with the record of the migration). */
  readonly sql: string;
}

/** Options of {@link openSqliteDatabase}. */
export interface OpenSqliteDatabaseOptions {
  /** A database file path (its folder is created when missing), or `':memory:'`. */
  readonly path: string;
  /** How long a statement waits for a lock held by another connection, in ms. @default 5000 */
  readonly busyTimeoutMs?: number;
}

const storeFailed = (operation: string, cause: unknown): RunplaneError =>
  new RunplaneError(
    'STORE_FAILED',
    `${operation} failed: ${cause instanceof Error ? cause.message : String(cause)}`,
    { cause },
  );

/**
 * @internal The `attempt(operation, fn)` of one store: runs `fn`, turning what it throws into
 * a {@link RunplaneError} (`STORE_FAILED`) that names the store and the operation.
 *
 * @param subject - the store, e.g. `'session records'`
 */
export function storeOperations(subject: string) {
  return <T>(operation: string, fn: () => T): T => {
    try {
      return fn();
    } catch (error) {
      throw new RunplaneError(
        'STORE_FAILED',
        `${subject} ${operation} failed: ${error instanceof Error ? error.message : String(error)}`,
        { cause: error },
      );
    }
  };
}

/**
 * Opens (creating when missing) a SQLite database for runplane's stores.
 *
 * @remarks Sets `journal_mode = WAL` (readers never block the writer), `synchronous = NORMAL`
 * (a commit survives a killed process; only a power loss can take the last commits) and
 * `foreign_keys = ON`. The folder of `path` is created. Close it with `db.close()` once every
 * store on it is done.
 *
 * @param options - {@link OpenSqliteDatabaseOptions}
 * @returns the open better-sqlite3 database
 * @throws {@link InvalidArgumentError} (`INVALID_ARGUMENT`) for an empty `path` or a bad
 *   `busyTimeoutMs`
 * @throws {@link RunplaneError} (`STORE_FAILED`) when the file cannot be created or opened
 * @example
 * ```ts
 * const db = openSqliteDatabase({ path: '.runplane/runplane.db' });
 * const eventLog = createSqliteEventLog({ database: db });
 * ```
 */
export function openSqliteDatabase(options: OpenSqliteDatabaseOptions): Database.Database {
  const { path } = options;
  if (typeof path !== 'string' || path === '') {
    throw new InvalidArgumentError(
      'path',
      `expected \`path\` to be a non-empty string, got ${JSON.stringify(path)}`,
    );
  }
  const busyTimeoutMs = options.busyTimeoutMs ?? 5_000;
  if (!Number.isInteger(busyTimeoutMs) || busyTimeoutMs < 0) {
    throw new InvalidArgumentError(
      'busyTimeoutMs',
      `expected \`busyTimeoutMs\` to be a non-negative integer, got ${String(busyTimeoutMs)}`,
    );
  }
  try {
    if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
    const db = new Database(path, { timeout: busyTimeoutMs });
    if (path !== ':memory:') db.pragma('journal_mode = WAL');
    db.pragma('synchronous = NORMAL');
    db.pragma('foreign_keys = ON');
    return db;
  } catch (error) {
    throw storeFailed(`opening the database ${path}`, error);
  }
}

/**
 * Applies the migrations that this database has not seen yet, in order, each in one
 * transaction with its record in `runplane_migrations`.
 *
 * @remarks Every store calls it with its own list on construction, so stores can be combined
 * on one database in any order; an id applied before is skipped.
 *
 * @param db - an open database
 * @param migrations - {@link SqliteMigration}s, oldest first
 * @returns the ids applied by this call
 * @throws {@link RunplaneError} (`STORE_FAILED`) when a migration fails (it is rolled back)
 */
export function applySqliteMigrations(
  db: Database.Database,
  migrations: readonly SqliteMigration[],
): string[] {
  const applied: string[] = [];
  try {
    db.exec(
      `CREATE TABLE IF NOT EXISTS runplane_migrations (
        id TEXT PRIMARY KEY,
        applied_at INTEGER NOT NULL
      ) WITHOUT ROWID`,
    );
    const seen = db.prepare<[string], { id: string }>(
      'SELECT id FROM runplane_migrations WHERE id = ?',
    );
    const record = db.prepare<[string, number]>(
      'INSERT INTO runplane_migrations (id, applied_at) VALUES (?, ?)',
    );
    for (const migration of migrations) {
      db.transaction(() => {
        if (seen.get(migration.id) !== undefined) return;
        db.exec(migration.sql);
        record.run(migration.id, Date.now());
        applied.push(migration.id);
      }).immediate();
    }
  } catch (error) {
    throw storeFailed('a database migration', error);
  }
  return applied;
}
