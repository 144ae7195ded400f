/**
 * Session records: the sessions the service created, with their owner and busy-session
 * strategy (docs/architecture.md, "Sessions and the busy-session rule", §11). A session's history and events live in their own stores.
 *
 * @module
 */
import type { SessionStrategy } from '../../machines/session.machine.js';

/**
 * How a session runs its messages: `runs` (each `user.message` is a run, under the session's
 * busy-session strategy) or `loop` (a TurnLoop: messages are items, consumed by turns).
 */
export type SessionMode = 'runs' | 'loop';

/**
 * What a cluster does with a session's running run when its holder is lost (README "Cluster",
 * docs/architecture.md §9c): `mark` ends it FAILED with cause `owner_lost` (CANCELLED when a
 * cancel was pending); `resume` starts it again under the same run id from its last recorded
 * safe point, at most `maxAttempts` times, and marks it when it has none. One instance ignores it.
 */
export type FailoverPolicy = 'mark' | 'resume';

/** The failover policies, for schemas. */
export const failoverPolicies = ['mark', 'resume'] as const satisfies readonly FailoverPolicy[];

/** One session. Times are clock ms. */
export interface SessionRecord {
  readonly ownerId: string;
  readonly sessionId: string;
  /** How the session runs its messages; fixed at creation. */
  readonly mode: SessionMode;
  /** What a `user.message` does while the session is busy (`runs` mode only). */
  readonly strategy: SessionStrategy;
  /** For `interrupt` and `preempt`: the active run's grace before it is cancelled, in ms. */
  readonly graceMs: number;
  /**
   * How long a tool call waits for its approval before it is denied with reason `timeout`, in
   * ms; `undefined`: the service's default.
   */
  readonly approvalTimeoutMs: number | undefined;
  /** What a cluster does with the running run when its holder is lost ({@link FailoverPolicy}). */
  readonly failover: FailoverPolicy;
  readonly createdAt: number;
  readonly updatedAt: number;
}

/** Where a page of {@link SessionRecords.list} starts: after this session, newest first. */
export interface SessionCursor {
  readonly createdAt: number;
  readonly sessionId: string;
}

/** The session-record store (synchronous). A deleted session is found by no method. */
export interface SessionRecords {
  /** Creates a session. @returns the record, or `undefined` when (ownerId, sessionId) exists */
  create(record: {
    ownerId: string;
    sessionId: string;
    strategy: SessionStrategy;
    graceMs: number;
    approvalTimeoutMs?: number | undefined;
    /** @default 'runs' */
    mode?: SessionMode | undefined;
    /** @default 'mark' */
    failover?: FailoverPolicy | undefined;
    at: number;
  }): SessionRecord | undefined;
  /** The session, or `undefined` (also for another owner's). */
  get(ownerId: string, sessionId: string): SessionRecord | undefined;
  /** Changes a session's settings. @returns the new record, or `undefined` when not found */
  update(
    ownerId: string,
    sessionId: string,
    changes: {
      strategy?: SessionStrategy | undefined;
      graceMs?: number | undefined;
      approvalTimeoutMs?: number | undefined;
      failover?: FailoverPolicy | undefined;
    },
    at: number,
  ): SessionRecord | undefined;
  /**
   * The owner's sessions, newest first (`createdAt`, then `sessionId`, descending), starting
   * after `page.after`. @returns at most `page.limit` records
   */
  list(
    ownerId: string,
    page: { after?: SessionCursor | undefined; limit: number },
  ): SessionRecord[];
  /**
   * Every live `loop` session of every owner, oldest first; with `{ owing: true }` only those
   * whose loop may owe an answer ({@link SessionRecords.markLoopOwes}), which a restarted
   * service rebuilds at once. @returns their keys
   */
  listLoops(filter?: { owing?: boolean }): Array<{ ownerId: string; sessionId: string }>;
  /**
   * Marks whether a loop session's loop may owe an answer: `true` before a message is logged,
   * `false` once its loop has settled with nothing left. A new session owes nothing; one from
   * before this mark existed owes until its loop is first rebuilt. Ignored for other sessions.
   */
  markLoopOwes(ownerId: string, sessionId: string, owes: boolean): void;
  /** How many sessions the owner has (deleted ones do not count). */
  count(ownerId: string): number;
  /**
   * Marks a session deleted: from now on no method finds it; its data is removed later by the
   * store's purge (`createSqliteSessionPurge`). @returns whether a live session was marked
   */
  markDeleted(ownerId: string, sessionId: string, at: number): boolean;
}
