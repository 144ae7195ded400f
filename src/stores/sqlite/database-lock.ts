/**
 * One server per database: an exclusive lock on a small file beside the database, held for
 * the life of the process that took it (docs/architecture.md, "Data lifecycle").
 *
 * @remarks The lock file is itself a SQLite database opened with `locking_mode = EXCLUSIVE`:
 * after its first write the connection keeps the file's exclusive POSIX lock until it is
 * closed. The kernel drops such a lock when its process ends in any way (exit, crash,
 * `kill -9`), so a stale lock never blocks a restart; the file left on disk is reused.
 *
 * @module
 */
import { lstatSync, mkdirSync, readlinkSync, realpathSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import Database from 'better-sqlite3';
import { RunplaneError } from '../../errors.js';

/** Symbolic links followed at most, as the kernel's own limit (ELOOP). */
const maxLinks = 40;

/**
 * The one name of a database file however it is reached (relative, `..`, a symlink to the file
 * or to a directory on its path, a symlink to a file not created yet), so every server that
 * opens it takes the same lock. A hard link is another name of the file that no path
 * resolution reveals (README, limits).
 */
function canonicalPath(databasePath: string): string {
  let path = resolve(databasePath);
  for (let links = 0; links < maxLinks; links++) {
    try {
      return realpathSync(path);
    } catch {
      // Not created yet. It may be a dangling link (SQLite creates its target); its directory
      // may be reached through links.
      let dir = dirname(path);
      try {
        dir = realpathSync(dir);
      } catch {
        return path;
      }
      const name = join(dir, basename(path));
      try {
        if (!lstatSync(name).isSymbolicLink()) return name;
      } catch {
        return name;
      }
      path = resolve(dir, readlinkSync(name));
    }
  }
  return path;
}

/** A held lock; `release()` frees it (idempotent). */
export interface SqliteDatabaseLock {
  /** The lock file, `<database>.lock` beside the database's real path. */
  readonly path: string;
  release(): void;
}

/**
 * Takes the lock of the database at `databasePath`, or refuses at once.
 *
 * @param databasePath - the database file (`':memory:'` takes no lock)
 * @returns the held {@link SqliteDatabaseLock}
 * @throws {@link RunplaneError} (`STORE_FAILED`) saying that another process (or another
 *   server in this one) holds the database, or that the lock file cannot be written
 * @example
 * ```ts
 * const lock = lockSqliteDatabase('.runplane/runplane.db');
 * try { ... } finally { lock.release(); }
 * ```
 */
export function lockSqliteDatabase(databasePath: string): SqliteDatabaseLock {
  if (databasePath === ':memory:') return { path: ':memory:.lock', release() {} };
  const path = `${canonicalPath(databasePath)}.lock`;
  let db: Database.Database | undefined;
  try {
    mkdirSync(dirname(path), { recursive: true });
    db = new Database(path, { timeout: 0 });
    db.pragma('locking_mode = EXCLUSIVE');
    // The first write takes the exclusive lock, and EXCLUSIVE mode keeps it.
    db.exec('CREATE TABLE IF NOT EXISTS runplane_lock (pid INTEGER NOT NULL, at INTEGER NOT NULL)');
    db.prepare('DELETE FROM runplane_lock').run();
    db.prepare('INSERT INTO runplane_lock (pid, at) VALUES (?, ?)').run(process.pid, Date.now());
  } catch (error) {
    db?.close();
    const busy =
      (error as { code?: unknown }).code === 'SQLITE_BUSY' ||
      (error as { code?: unknown }).code === 'SQLITE_LOCKED';
    throw new RunplaneError(
      'STORE_FAILED',
      busy
        ? `the database ${databasePath} is in use by another runplane serve (it holds ${path}); stop that one first, or give this one another --db`
        : `could not take the lock ${path}: ${error instanceof Error ? error.message : String(error)}`,
      { cause: error },
    );
  }
  const held = db;
  return {
    path,
    release() {
      if (held.open) held.close();
    },
  };
}
