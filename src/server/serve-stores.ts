/**
 * The stores `runplane serve` runs on, as one set: today the embedded default, one SQLite
 * database in WAL mode locked for this process (docs/architecture.md, "Event log and HTTP
 * service"). A cluster on Redis (docs/architecture.md, "Cluster on Redis") is another set of
 * the same shape.
 *
 * @module
 * @internal
 */
import type Database from 'better-sqlite3';
import type { ServeCluster } from '../cluster/serve-cluster.js';
import type { EventLog, SessionKey } from '../events/event-log.js';
import type { Inbox } from '../inbox/inbox.js';
import type { CheckpointStore } from '../stores/checkpoint-store.js';
import type { IdempotencyKeys } from '../stores/idempotency-keys.js';
import type { RunRecords } from '../stores/run-records.js';
import type { SessionRecords } from '../stores/session-records.js';
import type { SessionStore } from '../stores/session-store.js';
import { lockSqliteDatabase } from '../stores/sqlite/database-lock.js';
import {
  applySqliteMigrations,
  openSqliteDatabase,
  type SqliteMigration,
} from '../stores/sqlite/database.js';
import { createSqliteEventLog } from '../stores/sqlite/event-log.js';
import { createSqliteIdempotencyKeys } from '../stores/sqlite/idempotency-keys.js';
import { createSqliteInbox } from '../stores/sqlite/inbox.js';
import { createSqliteRunRecords } from '../stores/sqlite/run-records.js';
import { createSqliteSessionPurge } from '../stores/sqlite/session-purge.js';
import type { SessionPurge } from '../stores/session-purge.js';
import { createSqliteSessionRecords } from '../stores/sqlite/session-records.js';
import { createSqliteSessionStore } from '../stores/sqlite/session-store.js';
import {
  createSqliteCheckpointStore,
  type SqliteCheckpointStore,
} from '../stores/sqlite/sqlite-checkpoint-store.js';
import { createDevToken } from './auth.js';

/** @internal The stores of one server, and what it does with them besides the runtime. */
export interface ServeStores {
  /** The startup line naming where the data lives. */
  readonly banner: string;
  /** The event log; `forget` drops a purged session's in-memory state. */
  readonly eventLog: EventLog & { forget(key: SessionKey): void };
  readonly sessionStore: SessionStore;
  readonly inbox: Inbox;
  readonly sessions: SessionRecords;
  readonly runs: RunRecords;
  readonly idempotencyKeys: IdempotencyKeys;
  /** Where loop sessions checkpoint their TurnLoops; none for an in-memory database. */
  readonly checkpoints: CheckpointStore | undefined;
  /** The dev token of these stores (owner `dev`): created on first use, the same on every later start. */
  devToken(): string | Promise<string>;
  /** The background sweep's purge of deleted sessions; `onPurged` runs after each session's data is gone. */
  createPurge(onPurged: (key: SessionKey) => void): SessionPurge;
  /**
   * Set for a cluster on Redis: how the instance joins the others (`src/cluster/serve-cluster.ts`).
   * @default undefined (a single instance)
   */
  readonly cluster?: ServeCluster | undefined;
  /** Closes everything (idempotent); the lock is released last. */
  close(): void | Promise<void>;
}

const settingsMigrations: readonly SqliteMigration[] = [
  {
    id: 'serve/1',
    sql: `CREATE TABLE runplane_settings (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;`,
  },
];

/** The dev token of this database: created on first start, the same on every later one. */
function devTokenOf(db: Database.Database): string {
  applySqliteMigrations(db, settingsMigrations);
  const read = db.prepare<[], { value: string }>(
    "SELECT value FROM runplane_settings WHERE key = 'dev_token'",
  );
  const existing = read.get()?.value;
  if (existing !== undefined) return existing;
  const token = createDevToken();
  db.prepare("INSERT INTO runplane_settings (key, value) VALUES ('dev_token', ?)").run(token);
  return token;
}

/**
 * @internal Locks and opens the SQLite database at `dbPath` (its folder is created) and builds
 * every store on it.
 *
 * @param options - `dbPath`: the file, or `:memory:`; `eventTailBytes`: the event log's
 *   in-memory tail for the whole process, in bytes
 * @throws `RunplaneError` (`STORE_FAILED`) when another process holds the database (nothing
 *   was opened), or when the database cannot be opened (the lock is released again)
 */
export function openSqliteServeStores(options: {
  readonly dbPath: string;
  readonly eventTailBytes?: number | undefined;
}): ServeStores {
  const { dbPath } = options;
  // Before the database opens: a second server on this file stops here, touching nothing.
  const lock = lockSqliteDatabase(dbPath);
  let db: Database.Database | undefined;
  let checkpoints: SqliteCheckpointStore | undefined;
  try {
    db = openSqliteDatabase({ path: dbPath });
    const database = db;
    // Loop sessions checkpoint their TurnLoops here at shutdown (a table of the same file).
    checkpoints =
      dbPath === ':memory:' ? undefined : createSqliteCheckpointStore({ filename: dbPath });
    const checkpointStore = checkpoints;
    const eventLog = createSqliteEventLog({
      database,
      tail: { bytes: options.eventTailBytes },
    });
    let closed = false;
    return {
      banner: `database ${dbPath} (locked for this process: ${lock.path})`,
      eventLog,
      sessionStore: createSqliteSessionStore({ database }),
      inbox: createSqliteInbox({ database }),
      sessions: createSqliteSessionRecords({ database }),
      runs: createSqliteRunRecords({ database }),
      idempotencyKeys: createSqliteIdempotencyKeys({ database }),
      checkpoints: checkpointStore,
      devToken: () => devTokenOf(database),
      createPurge: (onPurged) => createSqliteSessionPurge({ database, onPurged }),
      close() {
        if (closed) return;
        closed = true;
        eventLog.close();
        checkpointStore?.close();
        if (database.open) database.close();
        lock.release();
      },
    };
  } catch (error) {
    checkpoints?.close();
    if (db?.open === true) db.close();
    lock.release();
    throw error;
  }
}
