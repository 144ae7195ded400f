/**
 * The SQLite {@link IdempotencyKeys}: one row per (owner, key), kept until it expires, so a
 * retry after a restart still replays the first answer.
 *
 * @module
 */
import type Database from 'better-sqlite3';
import type { IdempotencyClaim, IdempotencyKeys } from '../idempotency-keys.js';
import { applySqliteMigrations, storeOperations, type SqliteMigration } from './database.js';

/** The schema of the idempotency keys. */
export const idempotencyKeyMigrations: readonly SqliteMigration[] = [
  {
    id: 'idempotency-keys/1',
    sql: `
      CREATE TABLE runplane_idempotency_keys (
        owner_id TEXT NOT NULL,
        key TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        locked_until INTEGER NOT NULL,
        status INTEGER,
        body TEXT,
        PRIMARY KEY (owner_id, key)
      ) WITHOUT ROWID;
      CREATE INDEX runplane_idempotency_keys_by_age
        ON runplane_idempotency_keys (owner_id, created_at);
      CREATE INDEX runplane_idempotency_keys_by_created ON runplane_idempotency_keys (created_at);
    `,
  },
  {
    // The session an answered key belongs to: deleting the session deletes its keys.
    id: 'idempotency-keys/2',
    sql: `
      ALTER TABLE runplane_idempotency_keys ADD COLUMN session_id TEXT;
      CREATE INDEX runplane_idempotency_keys_by_session
        ON runplane_idempotency_keys (owner_id, session_id) WHERE session_id IS NOT NULL;
    `,
  },
];

interface KeyRow {
  fingerprint: string;
  locked_until: number;
  status: number | null;
  body: string | null;
}

/** Expired keys of other owners deleted by one `begin`, at most (the sweep stays short). */
const sweepBatch = 100;

const attempt = storeOperations('idempotency keys');

/**
 * Creates the idempotency keys on an open database (see `openSqliteDatabase`).
 *
 * @remarks `begin` runs in one immediate transaction: forget the owner's expired keys (and up
 * to 100 of anyone's), then read, claim or re-claim the key, counting the owner's live keys.
 *
 * @param options - `database`: the open database (never closed by the store)
 * @returns the {@link IdempotencyKeys}
 * @throws `RunplaneError` (`STORE_FAILED`) when the migration fails; every method throws
 *   it when a statement fails
 * @example
 * ```ts
 * const idempotencyKeys = createSqliteIdempotencyKeys({ database });
 * ```
 */
export function createSqliteIdempotencyKeys(options: {
  database: Database.Database;
}): IdempotencyKeys {
  const db = options.database;
  applySqliteMigrations(db, idempotencyKeyMigrations);
  const forgetOwnersExpired = db.prepare<[string, number]>(
    'DELETE FROM runplane_idempotency_keys WHERE owner_id = ? AND created_at <= ?',
  );
  const sweepExpired = db.prepare<[number, number]>(
    `DELETE FROM runplane_idempotency_keys WHERE (owner_id, key) IN (
       SELECT owner_id, key FROM runplane_idempotency_keys WHERE created_at <= ? LIMIT ?)`,
  );
  const forgetSession = db.prepare<[string, string]>(
    'DELETE FROM runplane_idempotency_keys WHERE owner_id = ? AND session_id = ?',
  );
  const read = db.prepare<[string, string], KeyRow>(
    `SELECT fingerprint, locked_until, status, body FROM runplane_idempotency_keys
     WHERE owner_id = ? AND key = ?`,
  );
  const count = db.prepare<[string], { n: number }>(
    'SELECT COUNT(*) AS n FROM runplane_idempotency_keys WHERE owner_id = ?',
  );
  const insert = db.prepare<[string, string, string, number, number]>(
    `INSERT INTO runplane_idempotency_keys (owner_id, key, fingerprint, created_at, locked_until)
     VALUES (?, ?, ?, ?, ?)`,
  );
  const relock = db.prepare<[number, string, string]>(
    'UPDATE runplane_idempotency_keys SET locked_until = ? WHERE owner_id = ? AND key = ?',
  );
  const answer = db.prepare<[number, string, string | null, string, string]>(
    `UPDATE runplane_idempotency_keys SET status = ?, body = ?, session_id = ?
     WHERE owner_id = ? AND key = ? AND status IS NULL`,
  );
  const remove = db.prepare<[string, string]>(
    'DELETE FROM runplane_idempotency_keys WHERE owner_id = ? AND key = ? AND status IS NULL',
  );

  const begin = db.transaction((request: Parameters<IdempotencyKeys['begin']>[0]) => {
    const expiredAt = request.at - request.ttlMs;
    forgetOwnersExpired.run(request.ownerId, expiredAt);
    sweepExpired.run(expiredAt, sweepBatch);
    const row = read.get(request.ownerId, request.key);
    if (row !== undefined) {
      if (row.fingerprint !== request.fingerprint) return { outcome: 'reused' } as const;
      if (row.status !== null && row.body !== null) {
        return { outcome: 'answered', answer: { status: row.status, body: row.body } } as const;
      }
      if (row.locked_until > request.at) {
        return { outcome: 'in_progress', lockedUntil: row.locked_until } as const;
      }
      relock.run(request.at + request.lockMs, request.ownerId, request.key);
      return { outcome: 'claimed' } as const;
    }
    if ((count.get(request.ownerId)?.n ?? 0) >= request.maxKeysPerOwner) {
      return { outcome: 'full' } as const;
    }
    insert.run(
      request.ownerId,
      request.key,
      request.fingerprint,
      request.at,
      request.at + request.lockMs,
    );
    return { outcome: 'claimed' } as const;
  });

  return {
    begin: (request): IdempotencyClaim => attempt('begin', () => begin.immediate(request)),
    complete(ownerId, key, stored) {
      attempt('complete', () =>
        answer.run(stored.status, stored.body, stored.sessionId ?? null, ownerId, key),
      );
    },
    release(ownerId, key) {
      attempt('release', () => remove.run(ownerId, key));
    },
    forgetSession(ownerId, sessionId) {
      attempt('forgetSession', () => forgetSession.run(ownerId, sessionId));
    },
  };
}
