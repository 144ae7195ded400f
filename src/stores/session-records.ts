/**
 * Session records: the sessions the service created, with their owner and busy-session
 * strategy (docs/architecture.md, "Sessions and the busy-session rule", §11). A session's history and events live in their own stores.
 *
 * @module
 */
import type { SessionStrategy } from '../../machines/session.machine.js';

/** One session. Times are clock ms. */
export interface SessionRecord {
  readonly ownerId: string;
  readonly sessionId: string;
  /** What a `user.message` does while the session is busy. */
  readonly strategy: SessionStrategy;
  /** For `interrupt` and `preempt`: the active run's grace before it is cancelled, in ms. */
  readonly graceMs: number;
  readonly createdAt: number;
  readonly updatedAt: number;
}

/** The session-record store (synchronous). */
export interface SessionRecords {
  /** Creates a session. @returns the record, or `undefined` when (ownerId, sessionId) exists */
  create(record: {
    ownerId: string;
    sessionId: string;
    strategy: SessionStrategy;
    graceMs: number;
    at: number;
  }): SessionRecord | undefined;
  /** The session, or `undefined` (also for another owner's). */
  get(ownerId: string, sessionId: string): SessionRecord | undefined;
  /** Changes a session's settings. @returns the new record, or `undefined` when not found */
  update(
    ownerId: string,
    sessionId: string,
    changes: { strategy?: SessionStrategy | undefined; graceMs?: number | undefined },
    at: number,
  ): SessionRecord | undefined;
}
