/**
 * The SQLite {@link EventLog}: per-session `seq` that survives restarts and never rewinds
 * (docs/architecture.md, "Event log and HTTP service"), with followers woken in process and served from a small tail buffer.
 *
 * @module
 */
import type Database from 'better-sqlite3';
import { setMaxListeners } from 'node:events';
import { createIdSequence } from '../../ids.js';
import { InvalidArgumentError, RunplaneError } from '../../errors.js';
import type { EventLog, ReadOptions, RunplaneEvent, SessionKey } from '../../events/event-log.js';
import { matchesReadOptions, toPayloadJson, toStoredEvent } from '../../events/stored-event.js';
import { applySqliteMigrations, openSqliteDatabase, type SqliteMigration } from './database.js';

/** Options of {@link createSqliteEventLog}: give `path` or an open `database`. */
export interface SqliteEventLogOptions {
  /** A database file path (created when missing), or `':memory:'`. */
  readonly path?: string;
  /** An open database to share (see `openSqliteDatabase`); the log then never closes it. */
  readonly database?: Database.Database;
  /** How many events one query of `follow` reads at most; a positive integer. @default 256 */
  readonly followBatchSize?: number;
  /**
   * How many bytes of payload (UTF-8 JSON) one query of `follow` reads at most (at least one
   * event): what a follower that stopped taking events holds, whatever their size. A positive
   * integer. @default 262144 (256 KiB)
   */
  readonly followBatchBytes?: number;
  /**
   * The in-memory tail that serves caught-up followers without a query: up to `events` of each
   * session's latest events, for up to `sessions` sessions, and at most `bytes` for the whole
   * log (one budget, whatever the number of sessions). An event counts as its payload's JSON
   * in UTF-8 bytes (never less than V8 holds its strings in) plus
   * {@link tailEventOverheadBytes}; past the budget the least recently used
   * sessions' tails are dropped first, and an event larger than the whole budget is not kept.
   * Non-negative integers; a dropped tail only costs followers a query.
   * @default { events: 64, sessions: 1000, bytes: 8388608 } (8 MiB)
   */
  readonly tail?: {
    readonly events?: number;
    readonly sessions?: number;
    readonly bytes?: number;
  };
}

/** What one tail event counts beyond its payload's JSON length, in bytes (ids, fields). */
const tailEventOverheadBytes = 200;

/** The default byte budget of the in-memory tail of one log: 8 MiB. */
const defaultTailBytes = 8 * 1024 * 1024;

/** An {@link EventLog} on SQLite; `close()` closes the database it opened. */
export interface SqliteEventLog extends EventLog {
  /** Ends every `follow` iterator and closes the database when the log opened it. */
  close(): void;
  /**
   * Forgets what the log holds in memory of a session whose rows were deleted (its tail and
   * `seq`; see `createSqliteSessionPurge`), and ends the session's `follow` iterators.
   */
  forget(key: SessionKey): void;
}

/** The schema of the event log. */
export const eventLogMigrations: readonly SqliteMigration[] = [
  {
    id: 'event-log/1',
    sql: `
      CREATE TABLE runplane_events (
        owner_id TEXT NOT NULL,
        session_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        id TEXT NOT NULL,
        run_id TEXT,
        type TEXT NOT NULL,
        payload TEXT NOT NULL,
        at INTEGER NOT NULL,
        PRIMARY KEY (owner_id, session_id, seq)
      ) WITHOUT ROWID;
      CREATE TABLE runplane_event_seqs (
        owner_id TEXT NOT NULL,
        session_id TEXT NOT NULL,
        last_seq INTEGER NOT NULL,
        PRIMARY KEY (owner_id, session_id)
      ) WITHOUT ROWID;
      -- The high-water mark of each session, in the same transaction as the insert: deleting
      -- events never lowers it, so seq never rewinds.
      CREATE TRIGGER runplane_events_high_water AFTER INSERT ON runplane_events BEGIN
        INSERT INTO runplane_event_seqs (owner_id, session_id, last_seq)
        VALUES (NEW.owner_id, NEW.session_id, NEW.seq)
        ON CONFLICT (owner_id, session_id) DO UPDATE SET last_seq = max(last_seq, NEW.seq);
      END;
    `,
  },
  {
    // `hasRun` (the registry's `ended` vs `not_found`) must not scan a long session.
    id: 'event-log/2',
    sql: `CREATE INDEX runplane_events_by_run ON runplane_events (owner_id, session_id, run_id);`,
  },
];

interface EventRow {
  seq: number;
  id: string;
  run_id: string | null;
  type: string;
  payload: string;
  at: number;
}

/** What the log keeps in memory of one session. */
interface SessionState {
  lastSeq: number;
  /** The latest events, oldest first, contiguous up to `lastSeq`. */
  readonly tail: RunplaneEvent[];
  /** What each tail event counts against the byte budget, in the same order. */
  readonly tailSizes: number[];
  /** The sum of `tailSizes`. */
  tailBytes: number;
  readonly waiters: Set<() => void>;
  /** The session's rows were deleted: its followers end. */
  gone: boolean;
}

const keyOf = (key: SessionKey) => `${key.ownerId}\u0000${key.sessionId}`;

const storeFailed = (operation: string, cause: unknown): RunplaneError =>
  cause instanceof RunplaneError
    ? cause
    : new RunplaneError(
        'STORE_FAILED',
        `event log ${operation} failed: ${cause instanceof Error ? cause.message : String(cause)}`,
        { cause },
      );

const count = (name: string, value: number | undefined, fallback: number, min: number) => {
  const n = value ?? fallback;
  if (!Number.isInteger(n) || n < min) {
    throw new InvalidArgumentError(
      name,
      `expected \`${name}\` to be an integer of at least ${min}, got ${String(value)}`,
    );
  }
  return n;
};

/**
 * Creates an event log on SQLite.
 *
 * @remarks `append` is one `INSERT` (one commit); a trigger keeps each session's high-water
 * mark (`runplane_event_seqs`) in the same transaction, so `seq` stays strictly increasing
 * across restarts and even if old events are deleted. The next `seq` is kept in memory: one
 * process writes a database (a second writer process is not supported). `follow` replays from
 * the table, then sleeps until an `append` of this log wakes it; a follower that is caught up
 * is served from the session's in-memory tail, without a query.
 *
 * @param options - {@link SqliteEventLogOptions}
 * @returns the log, with `close()`
 * @throws {@link InvalidArgumentError} (`INVALID_ARGUMENT`) when neither or both of `path` and
 *   `database` are given, or for a bad `followBatchSize` or `tail`
 * @throws {@link RunplaneError} (`STORE_FAILED`) when the database cannot be opened or migrated;
 *   `append` and `read` throw (reject) with it when a statement fails
 * @example
 * ```ts
 * const database = openSqliteDatabase({ path: '.runplane/runplane.db' });
 * const runtime = createRuntime({ stores: { eventLog: createSqliteEventLog({ database }) } });
 * ```
 */
export function createSqliteEventLog(options: SqliteEventLogOptions): SqliteEventLog {
  const nextEventId = createIdSequence();
  if ((options.path === undefined) === (options.database === undefined)) {
    throw new InvalidArgumentError(
      'options',
      'expected `options` to be exactly one of `path` and `database`, got ' +
        (options.path === undefined ? 'neither' : 'both'),
    );
  }
  const batchSize = count('followBatchSize', options.followBatchSize, 256, 1);
  const batchBytes = count('followBatchBytes', options.followBatchBytes, 256 * 1024, 1);
  const tailEvents = count('tail.events', options.tail?.events, 64, 0);
  const tailSessions = count('tail.sessions', options.tail?.sessions, 1_000, 0);
  const tailBudget = count('tail.bytes', options.tail?.bytes, defaultTailBytes, 0);
  const owned = options.database === undefined;
  const db = options.database ?? openSqliteDatabase({ path: options.path ?? '' });
  applySqliteMigrations(db, eventLogMigrations);

  const insert = db.prepare<
    [string, string, number, string, string | null, string, string, number]
  >(
    `INSERT INTO runplane_events (owner_id, session_id, seq, id, run_id, type, payload, at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
  );
  const select = db.prepare<
    {
      owner: string;
      session: string;
      after: number;
      runId: string | null;
      types: string | null;
      limit: number;
    },
    EventRow
  >(
    `SELECT seq, id, run_id, type, payload, at FROM runplane_events
     WHERE owner_id = @owner AND session_id = @session AND seq > @after
       AND (@runId IS NULL OR run_id = @runId)
       AND (@types IS NULL OR type IN (SELECT value FROM json_each(@types)))
     ORDER BY seq LIMIT @limit`,
  );
  // octet_length reads a payload's size from its record header, not the payload itself.
  const selectSizes = db.prepare<
    {
      owner: string;
      session: string;
      after: number;
      runId: string | null;
      types: string | null;
      limit: number;
    },
    { bytes: number }
  >(
    `SELECT octet_length(payload) AS bytes FROM runplane_events
     WHERE owner_id = @owner AND session_id = @session AND seq > @after
       AND (@runId IS NULL OR run_id = @runId)
       AND (@types IS NULL OR type IN (SELECT value FROM json_each(@types)))
     ORDER BY seq LIMIT @limit`,
  );
  const selectLastSeq = db.prepare<[string, string], { last_seq: number }>(
    'SELECT last_seq FROM runplane_event_seqs WHERE owner_id = ? AND session_id = ?',
  );
  const selectRun = db.prepare<[string, string, string], { one: number }>(
    `SELECT 1 AS one FROM runplane_events WHERE owner_id = ? AND session_id = ? AND run_id = ?
     LIMIT 1`,
  );

  /** Sessions written or followed lately, least recent first (a Map keeps insertion order). */
  const states = new Map<string, SessionState>();
  /** The bytes all tails count together; at most `tailBudget` between appends. */
  let tailBytes = 0;

  const dropTail = (state: SessionState) => {
    tailBytes -= state.tailBytes;
    state.tailBytes = 0;
    state.tail.length = 0;
    state.tailSizes.length = 0;
  };
  const shiftTail = (state: SessionState) => {
    state.tail.shift();
    const size = state.tailSizes.shift() ?? 0;
    state.tailBytes -= size;
    tailBytes -= size;
  };
  /** Keeps `stored` in its session's tail, within the per-session and the whole-log bounds. */
  const keepInTail = (state: SessionState, stored: RunplaneEvent, size: number) => {
    if (tailEvents === 0) return;
    if (size > tailBudget) {
      // The tail must stay contiguous up to `lastSeq`: without this event, it holds nothing.
      dropTail(state);
      return;
    }
    state.tail.push(stored);
    state.tailSizes.push(size);
    state.tailBytes += size;
    tailBytes += size;
    if (state.tail.length > tailEvents) shiftTail(state);
    if (tailBytes <= tailBudget) return;
    // Over the budget: drop the tails of the least recently used sessions first.
    for (const other of states.values()) {
      if (tailBytes <= tailBudget) return;
      if (other !== state) dropTail(other);
    }
    while (tailBytes > tailBudget) shiftTail(state);
  };
  const closing = new AbortController();
  // Every follower (an SSE client each) listens on it: hundreds are expected, not a leak.
  setMaxListeners(0, closing.signal);

  const stateOf = (key: SessionKey): SessionState => {
    const k = keyOf(key);
    let state = states.get(k);
    if (state !== undefined) {
      states.delete(k); // move to the most recent end
      states.set(k, state);
      return state;
    }
    let lastSeq: number;
    try {
      lastSeq = selectLastSeq.get(key.ownerId, key.sessionId)?.last_seq ?? 0;
    } catch (error) {
      throw storeFailed('lastSeq', error);
    }
    state = { lastSeq, tail: [], tailSizes: [], tailBytes: 0, waiters: new Set(), gone: false };
    states.set(k, state);
    // Forget the least recent sessions nobody waits on; their state is reloaded from the table.
    if (states.size > tailSessions) {
      for (const [oldKey, old] of states) {
        if (states.size <= tailSessions) break;
        if (old.waiters.size === 0 && oldKey !== k) {
          dropTail(old);
          states.delete(oldKey);
        }
      }
    }
    return state;
  };

  const toEvent = (sessionId: string, row: EventRow): RunplaneEvent => {
    let payload: Record<string, unknown>;
    try {
      payload = JSON.parse(row.payload) as Record<string, unknown>;
    } catch (error) {
      throw storeFailed(`read (event ${row.seq} has a payload that is not JSON)`, error);
    }
    return {
      seq: row.seq,
      id: row.id,
      sessionId,
      runId: row.run_id ?? undefined,
      type: row.type,
      payload,
      at: row.at,
    };
  };

  const readRows = (key: SessionKey, options: ReadOptions, limit: number): RunplaneEvent[] => {
    try {
      return select
        .all({
          owner: key.ownerId,
          session: key.sessionId,
          after: options.after ?? 0,
          runId: options.runId ?? null,
          types: options.types === undefined ? null : JSON.stringify(options.types),
          limit,
        })
        .map((row) => toEvent(key.sessionId, row));
    } catch (error) {
      throw storeFailed('read', error);
    }
  };

  /**
   * The next batch of `follow`: at most `batchSize` events and `batchBytes` of payload (at
   * least one event); `complete` when it holds every match after `options.after`.
   */
  const readBatch = (
    key: SessionKey,
    options: ReadOptions,
  ): { events: RunplaneEvent[]; complete: boolean } => {
    let sizes: Array<{ bytes: number }>;
    try {
      sizes = selectSizes.all({
        owner: key.ownerId,
        session: key.sessionId,
        after: options.after ?? 0,
        runId: options.runId ?? null,
        types: options.types === undefined ? null : JSON.stringify(options.types),
        limit: batchSize,
      });
    } catch (error) {
      throw storeFailed('read', error);
    }
    let take = 0;
    let bytes = 0;
    for (const size of sizes) {
      bytes += size.bytes;
      if (take > 0 && bytes > batchBytes) break;
      take++;
    }
    if (take === 0) return { events: [], complete: true };
    return {
      events: readRows(key, options, take),
      complete: take === sizes.length && sizes.length < batchSize,
    };
  };

  /** Resolves on the next append to the session, or when `signal` aborts or the log closes. */
  const nextAppend = (state: SessionState, signal: AbortSignal | undefined): Promise<void> =>
    new Promise<void>((resolve) => {
      const wake = () => {
        signal?.removeEventListener('abort', wake);
        closing.signal.removeEventListener('abort', wake);
        state.waiters.delete(wake);
        resolve();
      };
      state.waiters.add(wake);
      signal?.addEventListener('abort', wake, { once: true });
      closing.signal.addEventListener('abort', wake, { once: true });
    });

  return {
    append(_ctx, key, event) {
      const state = stateOf(key);
      const stored = toStoredEvent(key, state.lastSeq + 1, nextEventId(), event);
      const json = toPayloadJson(stored.payload);
      try {
        insert.run(
          key.ownerId,
          key.sessionId,
          stored.seq,
          stored.id,
          stored.runId ?? null,
          stored.type,
          json,
          stored.at,
        );
      } catch (error) {
        throw storeFailed('append', error);
      }
      state.lastSeq = stored.seq;
      keepInTail(state, stored, Buffer.byteLength(json) + tailEventOverheadBytes);
      for (const wake of [...state.waiters]) wake();
      return stored;
    },

    read(_ctx, key, readOptions = {}) {
      try {
        return Promise.resolve(
          readRows(key, readOptions, readOptions.limit ?? Number.MAX_SAFE_INTEGER),
        );
      } catch (error) {
        return Promise.reject(storeFailed('read', error));
      }
    },

    async *follow(ctx, key, followOptions = {}) {
      const signal = ctx.signal;
      let after = followOptions.after ?? 0;
      const stopped = () => signal?.aborted === true || closing.signal.aborted;
      while (!stopped()) {
        const state = stateOf(key);
        const upTo = state.lastSeq;
        const first = state.tail[0];
        if (after < upTo && first !== undefined && first.seq <= after + 1) {
          // Caught up: the next event is in the tail (events are only ever appended to it).
          // One at a time, so a follower that stops taking events holds one, not the tail.
          const event = state.tail[after + 1 - first.seq];
          if (event !== undefined) {
            after = event.seq;
            if (matchesReadOptions(event, followOptions)) {
              yield event;
              if (stopped()) return;
            }
            continue;
          }
        }
        while (after < upTo && !stopped()) {
          const batch = readBatch(key, { ...followOptions, after });
          const events: Array<RunplaneEvent | undefined> = batch.events;
          for (let i = 0; i < events.length; i++) {
            const event = events[i];
            if (event === undefined) continue;
            events[i] = undefined; // handed over: the batch no longer holds it
            after = event.seq;
            yield event;
            if (stopped()) return;
          }
          // A complete batch read every match there was: everything up to `upTo` was seen.
          if (batch.complete) after = Math.max(after, upTo);
        }
        if (stopped()) return;
        const current = stateOf(key);
        if (current.lastSeq > after) continue;
        await nextAppend(current, signal);
        if (current.gone) return;
      }
    },

    hasRun(_ctx, key, runId) {
      try {
        return selectRun.get(key.ownerId, key.sessionId, runId) !== undefined;
      } catch (error) {
        throw storeFailed('hasRun', error);
      }
    },

    lastSeq(_ctx, key) {
      return stateOf(key).lastSeq;
    },

    forget(key) {
      const k = keyOf(key);
      const state = states.get(k);
      if (state === undefined) return;
      states.delete(k);
      dropTail(state);
      state.gone = true;
      for (const wake of [...state.waiters]) wake();
    },

    close() {
      closing.abort();
      if (owned && db.open) db.close();
    },
  };
}
