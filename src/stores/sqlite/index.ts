/**
 * `runplane/stores/sqlite`: the SQLite stores, on better-sqlite3 12 (the embedded default; a
 * native addon, built from source at install when no prebuilt binary can be fetched).
 *
 * A short tour:
 * - {@link openSqliteDatabase} opens one database file in WAL mode for every store;
 *   {@link applySqliteMigrations} lets each store create its tables once.
 * - {@link createSqliteEventLog} is the per-session event log (`seq` survives restarts);
 *   {@link createSqliteSessionStore} keeps each session's conversation history;
 *   {@link createSqliteInbox} queues hints. Hand them to
 *   `createRuntime({ stores: { eventLog, sessionStore, inbox } })`.
 * - {@link createSqliteSessionRecords} and {@link createSqliteRunRecords} are what
 *   `runplane serve` remembers of sessions (owner, strategy) and runs (status, outcome);
 *   {@link createSqliteIdempotencyKeys} keeps the first answers of `Idempotency-Key` requests.
 * - {@link createSqliteCheckpointStore} gives a `CheckpointStore` for
 *   `createTurnLoop({ store, checkpointId })` (its own file, or a shared one). Close it when done.
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
export { applySqliteMigrations, openSqliteDatabase } from './database.js';
export type { OpenSqliteDatabaseOptions, SqliteMigration } from './database.js';
export { createSqliteEventLog, eventLogMigrations } from './event-log.js';
export type { SqliteEventLog, SqliteEventLogOptions } from './event-log.js';
export { createSqliteIdempotencyKeys, idempotencyKeyMigrations } from './idempotency-keys.js';
export { createSqliteInbox, inboxMigrations } from './inbox.js';
export type { SqliteInbox, SqliteInboxOptions } from './inbox.js';
export { createSqliteRunRecords, runRecordMigrations } from './run-records.js';
export { createSqliteSessionRecords, sessionRecordMigrations } from './session-records.js';
export type { RunRecord, RunRecordOutcome, RunRecords } from '../run-records.js';
export type { SessionRecord, SessionRecords } from '../session-records.js';
export type { IdempotencyClaim, IdempotencyKeys, StoredAnswer } from '../idempotency-keys.js';
