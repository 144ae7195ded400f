/**
 * A {@link CheckpointStore} on SQLite (better-sqlite3 12), in WAL mode, in a real file.
 *
 * @module
 */
import Database from 'better-sqlite3';
import { z } from 'zod';
import type { StoreContext } from '../../events/event-log.js';
import { nonEmptyString, parseOptions } from '../../validation.js';
import { throwIfAborted, type CheckpointStore } from '../checkpoint-store.js';

/** Options of {@link createSqliteCheckpointStore}. */
export interface SqliteCheckpointStoreOptions {
  /** Path of the database file; created when missing. `':memory:'` is refused: a checkpoint must outlive the process. */
  readonly filename: string;
  /** Table holding the checkpoints; letters, digits and `_`, not starting with a digit. @default 'runplane_checkpoints' */
  readonly table?: string;
  /**
   * SQLite `synchronous` pragma. `'FULL'` survives power loss; `'NORMAL'` (safe in WAL mode
   * against a process crash) is faster. @default 'FULL'
   */
  readonly synchronous?: 'FULL' | 'NORMAL';
  /** How long a write waits for another connection's lock, in ms. @default 5000 */
  readonly busyTimeoutMs?: number;
}

/** A SQLite checkpoint store: an incremental {@link CheckpointStore} that must be closed. */
export interface SqliteCheckpointStore extends Required<CheckpointStore> {
  /** The database file. */
  readonly filename: string;
  /** Closes the database; later calls reject. Idempotent. */
  close(): void;
}

const optionsSchema = z.object({
  filename: nonEmptyString.refine((value) => value !== ':memory:', {
    error: 'a file path (not :memory:)',
  }),
  table: z
    .string({ error: 'an SQL identifier ([A-Za-z_][A-Za-z0-9_]*)' })
    .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, { error: 'an SQL identifier ([A-Za-z_][A-Za-z0-9_]*)' })
    .optional(),
  synchronous: z.enum(['FULL', 'NORMAL'], { error: "'FULL' or 'NORMAL'" }).optional(),
  busyTimeoutMs: z
    .number({ error: 'a non-negative integer' })
    .int({ error: 'a non-negative integer' })
    .nonnegative({ error: 'a non-negative integer' })
    .optional(),
});

/**
 * Opens (or creates) a SQLite database file and keeps checkpoints in one table.
 *
 * @remarks better-sqlite3 is synchronous; each method does its work at call time and answers
 * with a settled promise. The database runs in WAL mode, so a reader never blocks the writer;
 * `set` is one `INSERT … ON CONFLICT DO UPDATE` that also clears the checkpoint's patches, in
 * one transaction; `append` adds a row to `<table>_patches` (numbered per checkpoint) if the
 * checkpoint exists (looked up in the index `<table>_ids`, so its cost does not grow with the
 * base); `load` reads both. Several processes may share the file
 * (`busyTimeoutMs` bounds lock waits).
 *
 * @param options - {@link SqliteCheckpointStoreOptions}
 * @returns an open {@link SqliteCheckpointStore}; call `close()` when done
 * @throws {@link InvalidArgumentError} (`INVALID_ARGUMENT`) naming the bad option
 * @throws the driver's error when the file cannot be opened
 * @example
 * ```ts
 * import { createSqliteCheckpointStore } from 'runplane/stores/sqlite';
 * const store = createSqliteCheckpointStore({ filename: '.runplane/checkpoints.db' });
 * ```
 */
export function createSqliteCheckpointStore(
  options: SqliteCheckpointStoreOptions,
): SqliteCheckpointStore {
  const parsed = parseOptions(optionsSchema, options, 'options');
  const table = parsed.table ?? 'runplane_checkpoints';
  const db = new Database(parsed.filename);
  try {
    db.pragma('journal_mode = WAL');
    db.pragma(`synchronous = ${parsed.synchronous ?? 'FULL'}`);
    db.pragma(`busy_timeout = ${parsed.busyTimeoutMs ?? 5_000}`);
    db.exec(
      `CREATE TABLE IF NOT EXISTS ${table} (
         id TEXT PRIMARY KEY,
         data BLOB NOT NULL,
         updated_at INTEGER NOT NULL
       ) WITHOUT ROWID;
       CREATE TABLE IF NOT EXISTS ${table}_patches (
         id TEXT NOT NULL,
         seq INTEGER NOT NULL,
         data BLOB NOT NULL,
         PRIMARY KEY (id, seq)
       ) WITHOUT ROWID;
       CREATE INDEX IF NOT EXISTS ${table}_ids ON ${table} (id)`,
    );
  } catch (error) {
    db.close();
    throw error;
  }
  const select = db.prepare<[string], { data: Buffer }>(`SELECT data FROM ${table} WHERE id = ?`);
  const upsert = db.prepare<[string, Uint8Array, number]>(
    `INSERT INTO ${table} (id, data, updated_at) VALUES (?, ?, ?)
     ON CONFLICT (id) DO UPDATE SET data = excluded.data, updated_at = excluded.updated_at`,
  );
  const remove = db.prepare<[string]>(`DELETE FROM ${table} WHERE id = ?`);
  const selectPatches = db.prepare<[string], { data: Buffer }>(
    `SELECT data FROM ${table}_patches WHERE id = ? ORDER BY seq`,
  );
  const insertPatch = db.prepare<[string, Uint8Array, string]>(
    `INSERT INTO ${table}_patches (id, seq, data)
     SELECT ?, COALESCE(MAX(seq), 0) + 1, ? FROM ${table}_patches WHERE id = ?`,
  );
  const removePatches = db.prepare<[string]>(`DELETE FROM ${table}_patches WHERE id = ?`);
  // Through the ids index: a seek in the table itself reads the base's whole row (a WITHOUT
  // ROWID table keeps it in its b-tree), which made an append of a few hundred bytes onto a
  // 7 MB base cost as much as reading the base.
  const hasBase = db.prepare<[string], { one: number }>(
    `SELECT 1 AS one FROM ${table} INDEXED BY ${table}_ids WHERE id = ?`,
  );
  const replace = db.transaction((checkpointId: string, data: Uint8Array) => {
    upsert.run(checkpointId, data, Date.now());
    removePatches.run(checkpointId);
  });
  const appendPatch = db.transaction((checkpointId: string, patch: Uint8Array) => {
    if (hasBase.get(checkpointId) === undefined) {
      throw new Error(`no checkpoint ${checkpointId} to append to`);
    }
    insertPatch.run(checkpointId, patch, checkpointId);
  });
  const removeAll = db.transaction((checkpointId: string) => {
    removePatches.run(checkpointId);
    return remove.run(checkpointId).changes > 0;
  });
  const readAll = db.transaction((checkpointId: string) => {
    const row = select.get(checkpointId);
    if (row === undefined) return undefined;
    const patches = selectPatches.all(checkpointId).map((p) => new Uint8Array(p.data));
    return { base: new Uint8Array(row.data), patches };
  });

  return {
    filename: parsed.filename,
    // eslint-disable-next-line @typescript-eslint/require-await -- async only to reject, not throw
    async get(ctx: StoreContext, checkpointId: string) {
      throwIfAborted(ctx);
      const row = select.get(checkpointId);
      return row === undefined ? undefined : new Uint8Array(row.data);
    },
    // eslint-disable-next-line @typescript-eslint/require-await -- async only to reject, not throw
    async set(ctx: StoreContext, checkpointId: string, data: Uint8Array) {
      throwIfAborted(ctx);
      replace(checkpointId, data);
    },
    // eslint-disable-next-line @typescript-eslint/require-await -- async only to reject, not throw
    async delete(ctx: StoreContext, checkpointId: string) {
      throwIfAborted(ctx);
      return removeAll(checkpointId);
    },
    // eslint-disable-next-line @typescript-eslint/require-await -- async only to reject, not throw
    async append(ctx: StoreContext, checkpointId: string, patch: Uint8Array) {
      throwIfAborted(ctx);
      appendPatch(checkpointId, patch);
    },
    // eslint-disable-next-line @typescript-eslint/require-await -- async only to reject, not throw
    async load(ctx: StoreContext, checkpointId: string) {
      throwIfAborted(ctx);
      return readAll(checkpointId);
    },
    close() {
      if (db.open) db.close();
    },
  };
}
