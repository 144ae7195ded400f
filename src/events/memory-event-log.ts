/**
 * The in-memory {@link EventLog}: arrays per session and promise waiters for `follow`.
 *
 * @module
 */
import { toSessionKeyString } from './event-log.js';
import { createIdSequence } from '../ids.js';
import type {
  EventLog,
  NewEvent,
  ReadOptions,
  RunplaneEvent,
  SessionKey,
  StoreContext,
} from './event-log.js';

/** Options of {@link createMemoryEventLog}. */
export interface MemoryEventLogOptions {
  /**
   * Keep about this many events per session (at least this many, at most a quarter more),
   * dropping the oldest (`seq` never rewinds). A positive integer. A run whose events were all
   * dropped is no longer known to `hasRun` (so the registry answers `not_found` for it).
   * @default Infinity
   */
  readonly maxEventsPerSession?: number;
}

interface SessionLog {
  events: RunplaneEvent[];
  /** runId → seq of its latest retained event: `hasRun` in O(1). */
  runs: Map<string, number>;
  lastSeq: number;
  waiters: Set<() => void>;
}

const keyOf = toSessionKeyString;

function matches(event: RunplaneEvent, options: ReadOptions): boolean {
  if (options.runId !== undefined && event.runId !== options.runId) return false;
  if (options.types !== undefined && !options.types.includes(event.type)) return false;
  return true;
}

/**
 * Creates an in-memory event log.
 *
 * @param options - {@link MemoryEventLogOptions}
 * @example
 * ```ts
 * const log = createMemoryEventLog();
 * log.append({}, { ownerId: 'u1', sessionId: 's1' }, { type: 'session.note', at: Date.now() });
 * ```
 */
export function createMemoryEventLog(options: MemoryEventLogOptions = {}): EventLog {
  const cap = options.maxEventsPerSession ?? Number.POSITIVE_INFINITY;
  // Trimming is amortized: up to a quarter over the cap, then back down to it in one splice.
  const trimAt = cap + Math.max(1, Math.ceil(cap / 4));
  const logs = new Map<string, SessionLog>();
  const nextEventId = createIdSequence();

  const logOf = (key: SessionKey): SessionLog => {
    const k = keyOf(key);
    let log = logs.get(k);
    if (log === undefined) {
      log = { events: [], runs: new Map(), lastSeq: 0, waiters: new Set() };
      logs.set(k, log);
    }
    return log;
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
      if (event === undefined || !matches(event, options)) continue;
      out.push(event);
      if (out.length >= limit) break;
    }
    return out;
  };

  return {
    append(_ctx: StoreContext, key: SessionKey, event: NewEvent): RunplaneEvent {
      const log = logOf(key);
      const stored: RunplaneEvent = {
        seq: ++log.lastSeq,
        id: nextEventId(),
        sessionId: key.sessionId,
        runId: event.runId,
        type: event.type,
        payload: event.payload ?? {},
        at: event.at,
      };
      log.events.push(stored);
      if (stored.runId !== undefined) log.runs.set(stored.runId, stored.seq);
      if (log.events.length >= trimAt) {
        log.events.splice(0, log.events.length - cap);
        const firstSeq = log.events[0]?.seq ?? log.lastSeq + 1;
        for (const [runId, seq] of log.runs) if (seq < firstSeq) log.runs.delete(runId);
      }
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
      while (signal?.aborted !== true) {
        const log = logOf(key);
        const upTo = log.lastSeq;
        const batch = readSync(key, { ...options, after, limit: undefined });
        for (const event of batch) {
          yield event;
          if (signal?.aborted) return;
        }
        // Everything up to `upTo` was read (matching or not); later appends are read next turn.
        // A cursor past the end stays where it is: it never rewinds.
        after = Math.max(after, upTo);
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
      return logs.get(keyOf(key))?.runs.has(runId) ?? false;
    },

    lastSeq(_ctx, key) {
      return logs.get(keyOf(key))?.lastSeq ?? 0;
    },
  };
}
