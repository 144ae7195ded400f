/**
 * `runplane/stores/sqlite`: the SQLite stores, on better-sqlite3 12 (the embedded default; a
 * native addon, built from source at install when no prebuilt binary can be fetched).
 *
 * A short tour:
 * - {@link createSqliteSessionStore} keeps each session's conversation history; hand it to
 *   `createRuntime({ stores: { sessionStore } })`.
 * - {@link createSqliteCheckpointStore} opens a database file in WAL mode and gives a
 *   `CheckpointStore` for `createTurnLoop({ store, checkpointId })`. Close it when done.
 *
 * @module
 */
export { createSqliteSessionStore } from './session-store.js';
export type { SqliteSessionStore, SqliteSessionStoreOptions } from './session-store.js';
export { createSqliteCheckpointStore } from './sqlite-checkpoint-store.js';
export type {
  SqliteCheckpointStore,
  SqliteCheckpointStoreOptions,
} from './sqlite-checkpoint-store.js';
