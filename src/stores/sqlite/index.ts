/**
 * `runplane/stores/sqlite`: the SQLite stores, on better-sqlite3 12 (the embedded default).
 *
 * A short tour:
 * - {@link createSqliteSessionStore} keeps each session's conversation history; hand it to
 *   `createRuntime({ stores: { sessionStore } })`.
 *
 * @module
 */
export { createSqliteSessionStore } from './session-store.js';
export type { SqliteSessionStore, SqliteSessionStoreOptions } from './session-store.js';
