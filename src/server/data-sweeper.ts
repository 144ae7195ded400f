/**
 * The background sweep of `runplane serve`: removes the data of deleted sessions, and with a
 * retention period marks sessions idle for longer as deleted first (docs/architecture.md,
 * "Data lifecycle").
 *
 * @remarks The sweep never holds the event loop for long: every step deletes at most
 * `batchSize` rows in one transaction, and the sweep yields to pending I/O (requests) between
 * steps. Deleting is idempotent and resumable: a session marked deleted before a crash is
 * purged by the next process's sweep.
 *
 * @module
 */
import { unrefTimer, type Clock } from '../clock.js';
import type { SessionKey } from '../events/event-log.js';
import type { SessionRecords } from '../stores/session-records.js';
import type { SessionPurge } from '../stores/session-purge.js';

/** Options of {@link createDataSweeper}. */
export interface DataSweeperOptions {
  /** The store's purge (SQLite's answers at once, a cluster's on Redis asynchronously). */
  readonly purge: SessionPurge;
  readonly sessions: SessionRecords;
  /** The clock of ages and of the sweep interval (the runtime's). */
  readonly clock: Clock;
  /**
   * Sessions with no activity (event or settings change) for this long, in ms, and no
   * unfinished run, are deleted. @default undefined (off: nothing expires)
   */
  readonly retentionMs?: number | undefined;
  /** Time between sweeps, in ms. @default 3600000 (1 h) */
  readonly intervalMs?: number;
  /** Rows one step deletes at most (one transaction). @default 500 */
  readonly batchSize?: number;
  /**
   * What the sweep awaits between steps. @default a `setImmediate` turn: every request whose
   * I/O is pending is served first
   */
  readonly yieldToRequests?: () => Promise<void>;
  /**
   * Whether a deleted session must be left for a later sweep (its runs are still settling).
   * @default never
   */
  readonly skip?: (key: SessionKey) => boolean;
  /** Receives a failing sweep's error (the next sweep tries again). */
  readonly reportError: (error: unknown) => void;
  /** Receives the report of every sweep that expired or purged something. */
  readonly onSwept?: (report: SweepReport) => void;
}

/** What one sweep did. */
export interface SweepReport {
  /** Sessions retention marked deleted. */
  readonly expired: number;
  /** Sessions whose data is gone. */
  readonly purged: number;
  /** Delete steps (transactions) run. */
  readonly steps: number;
}

/** The running sweeper. */
export interface DataSweeper {
  /** Starts a sweep now, or another one right after the one under way. */
  kick(): void;
  /** Runs a sweep (after the one under way, if any). @returns what it did */
  sweep(): Promise<SweepReport>;
  /** Stops the interval and waits for the sweep under way. */
  stop(): Promise<void>;
}

/** Sessions read per query of the sweep (a retention window, a page of deleted sessions). */
const pageSize = 100;

/**
 * Creates the sweeper and arms its interval (the first sweep runs at once).
 *
 * @param options - {@link DataSweeperOptions}
 * @returns the {@link DataSweeper}
 */
export function createDataSweeper(options: DataSweeperOptions): DataSweeper {
  const { purge, sessions, clock } = options;
  const batchSize = options.batchSize ?? 500;
  const intervalMs = options.intervalMs ?? 3_600_000;
  const yieldToRequests =
    options.yieldToRequests ?? (() => new Promise<void>((resolve) => setImmediate(resolve)));
  let current: Promise<SweepReport> | undefined;
  let again = false;
  let stopped = false;
  let timer: unknown;

  /** Purges one session: its steps, and whether it is gone (not `busy`, nor cut by a stop). */
  const purgeOne = async (key: SessionKey): Promise<{ steps: number; gone: boolean }> => {
    let steps = 0;
    for (;;) {
      steps++;
      const result = await purge.purgeStep(key, batchSize);
      if (result !== false) return { steps, gone: result === true };
      await yieldToRequests();
      if (stopped) return { steps, gone: false };
    }
  };

  const runSweep = async (): Promise<SweepReport> => {
    let expired = 0;
    let purged = 0;
    let steps = 0;
    if (options.retentionMs !== undefined) {
      const before = clock.now() - options.retentionMs;
      // Window by window in key order: one query never scans every session.
      let after: SessionKey | undefined = { ownerId: '', sessionId: '' };
      while (after !== undefined && !stopped) {
        const window = await purge.idleIn(before, after, pageSize);
        for (const key of window.idle) {
          if (sessions.markDeleted(key.ownerId, key.sessionId, clock.now())) expired++;
        }
        after = window.next;
        await yieldToRequests();
      }
    }
    for (let page = await purge.deleted(pageSize); page.length > 0 && !stopped;) {
      let skipped = 0;
      for (const key of page) {
        if (options.skip?.(key) === true) {
          skipped++;
          continue;
        }
        const one = await purgeOne(key);
        steps += one.steps;
        if (stopped) break;
        if (one.gone) purged++;
        else skipped++; // busy: a later sweep tries again
      }
      // Only sessions still settling (or busy) are left: a later sweep or a kick tries again.
      if (skipped === page.length) break;
      page = await purge.deleted(pageSize);
    }
    return { expired, purged, steps };
  };

  const sweep = (): Promise<SweepReport> => {
    const previous = current;
    const next = (async () => {
      await previous?.catch(() => undefined);
      return runSweep();
    })();
    current = next;
    void next
      .then((report) => {
        if (report.expired > 0 || report.purged > 0) options.onSwept?.(report);
      })
      .catch((error: unknown) => options.reportError(error))
      .finally(() => {
        if (current === next) current = undefined;
      });
    return next;
  };

  const arm = () => {
    if (stopped) return;
    timer = clock.setTimeout(() => {
      void sweep().catch(() => undefined);
      arm();
    }, intervalMs);
    unrefTimer(timer);
  };
  void sweep().catch(() => undefined);
  arm();

  return {
    kick() {
      if (stopped) return;
      if (current === undefined) {
        void sweep().catch(() => undefined);
      } else if (!again) {
        again = true;
        void current
          .catch(() => undefined)
          .then(() => {
            again = false;
            if (!stopped) void sweep().catch(() => undefined);
          });
      }
    },
    sweep,
    async stop() {
      stopped = true;
      clock.clearTimeout(timer);
      await current?.catch(() => undefined);
    },
  };
}
