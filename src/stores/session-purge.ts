/**
 * The purge of deleted sessions, as the background sweep drives it (`src/server/data-sweeper.ts`,
 * docs/architecture.md, "Data lifecycle"): SQLite's is synchronous
 * (`src/stores/sqlite/session-purge.ts`), a cluster's on Redis asynchronous
 * (`src/cluster/redis-session-purge.ts`), so every method may answer either way.
 *
 * @module
 */
import type { SessionKey } from '../events/event-log.js';

/**
 * What one purge step says: `true`, nothing of the session is left (or it was not deleted);
 * `false`, more steps are needed; `'busy'`, the session may not be purged now (on Redis: its
 * lease is held or it has unfinished runs) and is left for a later sweep.
 */
export type PurgeStepResult = boolean | 'busy';

/** A window of sessions that retention looks at (see {@link SessionPurge.idleIn}). */
export interface IdleWindow {
  /** The window's sessions idle since before the time asked. */
  readonly idle: SessionKey[];
  /** The key to continue after, `undefined` once the window reached the last session. */
  readonly next: SessionKey | undefined;
}

/** A store's purge of deleted sessions, step by step (each step bounded). */
export interface SessionPurge {
  /** Sessions marked deleted whose data is not gone yet, earliest deletion first. @returns at most `limit` */
  deleted(limit: number): SessionKey[] | Promise<SessionKey[]>;
  /**
   * One window of at most `window` sessions after `after` in key order: those live, with no
   * activity since `before` (clock ms) and no unfinished run, are what retention deletes.
   */
  idleIn(before: number, after: SessionKey, window: number): IdleWindow | Promise<IdleWindow>;
  /**
   * Deletes a bounded slice of a deleted session's data (at most `batchSize` rows or entries,
   * and about a megabyte of text); the session record goes last.
   */
  purgeStep(key: SessionKey, batchSize: number): PurgeStepResult | Promise<PurgeStepResult>;
}
