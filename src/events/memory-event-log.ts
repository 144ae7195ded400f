/**
 * The in-memory {@link EventLog}: arrays per session and promise waiters for `follow`, with a
 * bounded retention so that a long-lived process holds bounded memory.
 *
 * What outlives the retention is small: each session's last `seq` (so `seq` never rewinds) and,
 * for a while, the ids of runs whose events were dropped (so `hasRun` still answers, and a stale
 * cancel of such a run is `ended`, not `not_found`).
 *
 * @module
 */
import { toSessionKeyString } from './event-log.js';
import { matchesReadOptions, toStoredEvent } from './stored-event.js';
import { InvalidArgumentError } from '../errors.js';
import { createIdSequence } from '../ids.js';
import type {
  EventLog,
  NewEvent,
  ReadOptions,
  RunplaneEvent,
  SessionKey,
  StoreContext,
} from './event-log.js';

/**
 * Options of {@link createMemoryEventLog}: the retention. Every count takes `Infinity` (keep
 * everything); what is dropped is gone for `read` and `follow`, never for `lastSeq`.
 */
export interface MemoryEventLogOptions {
  /**
   * Keep about this many events per session (at least this many, at most a quarter more),
   * dropping the oldest (`seq` never rewinds). A positive integer.
   * @default 1000
   */
  readonly maxEventsPerSession?: number;
  /**
   * Keep at most this many events over all sessions: past it, every event of the least recently
   * written session is dropped (a session someone follows is skipped), and the session keeps
   * only its last `seq`, a few dozen bytes. A positive integer.
   * @default 100000 (with the runtime's own events, of a few hundred bytes each, some 30 MB)
   */
  readonly maxEvents?: number;
  /**
   * How long after its last event the id of a run whose events were all dropped is still known
   * to `hasRun`, in ms of event time (the log's "now" is the `at` of the latest event logged).
   * After it the run is unknown: a cancel of it answers `not_found`, and a caller-chosen `runId`
   * could be used again (generated ids never are). A non-negative number.
   * @default 86400000 (24 h)
   */
  readonly runIdRetentionMs?: number;
  /**
   * Keep at most this many ids of runs whose events were dropped; past it the earliest dropped
   * are forgotten first, even within `runIdRetentionMs`. A non-negative integer.
   * @default 100000
   */
  readonly maxRunIds?: number;
}

interface SessionLog {
  readonly key: string;
  events: RunplaneEvent[];
  /** runId → seq of its latest retained event: `hasRun` in O(1). */
  runs: Map<string, number>;
  lastSeq: number;
  waiters: Set<() => void>;
  /** Neighbours in the write order (least recently written first): an LRU list in O(1). */
  older: SessionLog | undefined;
  newer: SessionLog | undefined;
}

/** A run whose events were all dropped: its session key + run id, and its last event's `at`. */
interface DroppedRun {
  readonly key: string;
  readonly at: number;
}

const keyOf = toSessionKeyString;

const checkCount = (name: string, value: number | undefined, fallback: number, min: number) => {
  const n = value ?? fallback;
  if (!(Number.isSafeInteger(n) || n === Number.POSITIVE_INFINITY) || n < min) {
    throw new InvalidArgumentError(
      name,
      `expected \`${name}\` to be an integer of at least ${min} or Infinity, got ${String(value)}`,
    );
  }
  return n;
};

/**
 * Creates an in-memory event log with a bounded retention (see {@link MemoryEventLogOptions}).
 *
 * @remarks Memory is bounded by `maxEvents` events, `maxRunIds` run ids, and one small
 * tombstone (the last `seq`) per session that ever logged. A dropped run's id is answered by
 * `hasRun` (the runtime: a cancel is `ended`) for `runIdRetentionMs`, then forgotten (`not_found`).
 *
 * @param options - {@link MemoryEventLogOptions}
 * @throws {@link InvalidArgumentError} (`INVALID_ARGUMENT`) for a count that is not an integer
 *   in range (or `Infinity`)
 * @example
 * ```ts
 * const log = createMemoryEventLog({ maxEvents: 10_000 });
 * log.append({}, { ownerId: 'u1', sessionId: 's1' }, { type: 'session.note', at: Date.now() });
 * ```
 */
export function createMemoryEventLog(options: MemoryEventLogOptions = {}): EventLog {
  const cap = checkCount('maxEventsPerSession', options.maxEventsPerSession, 1_000, 1);
  const maxEvents = checkCount('maxEvents', options.maxEvents, 100_000, 1);
  const maxRunIds = checkCount('maxRunIds', options.maxRunIds, 100_000, 0);
  const runIdRetentionMs = options.runIdRetentionMs ?? 86_400_000;
  if (!(runIdRetentionMs >= 0)) {
    throw new InvalidArgumentError(
      'runIdRetentionMs',
      `expected \`runIdRetentionMs\` to be a non-negative number of milliseconds, got ${String(options.runIdRetentionMs)}`,
    );
  }
  // Trimming is amortized: up to a quarter over the cap, then back down to it in one splice.
  const trimAt = cap + Math.max(1, Math.ceil(cap / 4));
  // Retention walks the oldest entries often. A Map is never walked from its front here: after
  // many deletes there, V8 steps over every deleted slot until the next rehash, which made each
  // append cost up to a few dozen microseconds with 100,000 dropped run ids.
  /** Sessions with retained events or followers, by key. */
  const logs = new Map<string, SessionLog>();
  /** The same sessions in write order: `oldest` … `newest`. */
  let oldest: SessionLog | undefined;
  let newest: SessionLog | undefined;
  /** The last `seq` of sessions whose events were all dropped (tombstones). */
  const lastSeqs = new Map<string, number>();
  /** Session key + run id → the latest drop of a run whose events were all dropped. */
  const droppedRuns = new Map<string, DroppedRun>();
  /** The same drops in order (a run dropped again appears twice; the Map holds its latest). */
  const dropOrder: DroppedRun[] = [];
  let dropHead = 0;
  let total = 0;
  /** The latest `at` logged: the log's clock for `runIdRetentionMs`. */
  let now = Number.NEGATIVE_INFINITY;
  const nextEventId = createIdSequence();
  /** A frozen key object appended to last, and its string (see `append`). */
  let lastKeyObject: SessionKey | undefined;
  let lastKeyString = '';

  /**
   * The string of `key`. The runtime logs a session's events under one frozen key object: its
   * string is built once for a run of calls with it.
   */
  const stringOf = (key: SessionKey): string => {
    if (key === lastKeyObject) return lastKeyString;
    const k = keyOf(key);
    if (Object.isFrozen(key)) {
      lastKeyObject = key;
      lastKeyString = k;
    }
    return k;
  };

  const unlink = (log: SessionLog) => {
    if (log.older === undefined) oldest = log.newer;
    else log.older.newer = log.newer;
    if (log.newer === undefined) newest = log.older;
    else log.newer.older = log.older;
    log.older = undefined;
    log.newer = undefined;
  };

  const linkNewest = (log: SessionLog) => {
    log.older = newest;
    if (newest === undefined) oldest = log;
    else newest.newer = log;
    newest = log;
  };

  const logOf = (k: string): SessionLog => {
    let log = logs.get(k);
    if (log === undefined) {
      log = {
        key: k,
        events: [],
        runs: new Map(),
        lastSeq: lastSeqs.get(k) ?? 0,
        waiters: new Set(),
        older: undefined,
        newer: undefined,
      };
      lastSeqs.delete(k);
      logs.set(k, log);
      linkNewest(log);
    }
    return log;
  };

  /** Drops the `count` oldest events of a session, keeping the ids of runs that lost them all. */
  const dropOldest = (log: SessionLog, count: number) => {
    const dropped = log.events.splice(0, count);
    total -= dropped.length;
    for (const event of dropped) {
      if (event.runId === undefined || log.runs.get(event.runId) !== event.seq) continue;
      log.runs.delete(event.runId);
      if (maxRunIds > 0) {
        const key = log.key + event.runId;
        const drop: DroppedRun = { key, at: event.at };
        droppedRuns.set(key, drop);
        dropOrder.push(drop);
      }
    }
  };

  /** Drops whole sessions, least recently written first, until `maxEvents` holds again. */
  const dropSessions = (currentLog: SessionLog) => {
    let log = oldest;
    while (log !== undefined && total > maxEvents) {
      const next = log.newer;
      if (log !== currentLog && log.waiters.size === 0) {
        dropOldest(log, log.events.length);
        logs.delete(log.key);
        unlink(log);
        if (log.lastSeq > 0) lastSeqs.set(log.key, log.lastSeq);
      }
      log = next;
    }
    if (total > maxEvents) dropOldest(currentLog, total - maxEvents);
  };

  /** Forgets dropped run ids past `maxRunIds` or `runIdRetentionMs`, earliest dropped first. */
  const forgetRunIds = () => {
    while (dropHead < dropOrder.length) {
      const entry = dropOrder[dropHead]!;
      if (droppedRuns.size <= maxRunIds && now - entry.at < runIdRetentionMs) break;
      dropHead++;
      // Only the run's latest drop forgets it.
      if (droppedRuns.get(entry.key) === entry) droppedRuns.delete(entry.key);
    }
    if (dropHead > 1_024 && dropHead * 2 > dropOrder.length) {
      dropOrder.splice(0, dropHead);
      dropHead = 0;
    }
  };

  /** Index of the first event with seq > after (events are sorted by seq). */
  const firstAfter = (events: RunplaneEvent[], after: number): number => {
    let lo = 0;
    let hi = events.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if ((events[mid]?.seq ?? 0) <= after) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  };

  const readSync = (key: SessionKey, options: ReadOptions): RunplaneEvent[] => {
    const log = logs.get(keyOf(key));
    if (log === undefined) return [];
    const out: RunplaneEvent[] = [];
    const limit = options.limit ?? Number.POSITIVE_INFINITY;
    for (let i = firstAfter(log.events, options.after ?? 0); i < log.events.length; i++) {
      const event = log.events[i];
      if (event === undefined || !matchesReadOptions(event, options)) continue;
      out.push(event);
      if (out.length >= limit) break;
    }
    return out;
  };

  return {
    append(_ctx: StoreContext, key: SessionKey, event: NewEvent): RunplaneEvent {
      const log = logOf(stringOf(key));
      if (log !== newest) {
        // Move to the most recently written end.
        unlink(log);
        linkNewest(log);
      }
      const stored = toStoredEvent(key, ++log.lastSeq, nextEventId(), event);
      log.events.push(stored);
      total++;
      if (stored.at > now) now = stored.at;
      if (stored.runId !== undefined) log.runs.set(stored.runId, stored.seq);
      if (log.events.length >= trimAt) dropOldest(log, log.events.length - cap);
      if (total > maxEvents) dropSessions(log);
      if (dropHead < dropOrder.length) forgetRunIds();
      if (log.waiters.size > 0) {
        const waiters = [...log.waiters];
        log.waiters.clear();
        for (const wake of waiters) wake();
      }
      return stored;
    },

    read(_ctx, key, options = {}) {
      return Promise.resolve(readSync(key, options));
    },

    async *follow(ctx, key, options = {}) {
      let after = options.after ?? 0;
      const signal = ctx.signal;
      const k = keyOf(key);
      while (signal?.aborted !== true) {
        const upTo = logOf(k).lastSeq;
        const batch = readSync(key, { ...options, after, limit: undefined });
        for (const event of batch) {
          yield event;
          if (signal?.aborted) return;
        }
        // Everything up to `upTo` was read (matching or not); later appends are read next turn.
        // A cursor past the end stays where it is: it never rewinds.
        after = Math.max(after, upTo);
        // Looked up again: while the caller held an event, the session may have been dropped.
        const log = logOf(k);
        if (log.lastSeq > after) continue;
        await new Promise<void>((resolve) => {
          const wake = () => {
            signal?.removeEventListener('abort', wake);
            log.waiters.delete(wake);
            resolve();
          };
          log.waiters.add(wake);
          signal?.addEventListener('abort', wake, { once: true });
        });
      }
    },

    hasRun(_ctx, key, runId) {
      const k = stringOf(key);
      return logs.get(k)?.runs.has(runId) === true || droppedRuns.has(k + runId);
    },

    lastSeq(_ctx, key) {
      const k = stringOf(key);
      return logs.get(k)?.lastSeq ?? lastSeqs.get(k) ?? 0;
    },
  };
}
