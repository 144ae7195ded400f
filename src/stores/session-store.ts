/**
 * The session store: the conversation history of each (ownerId, sessionId) (docs/architecture.md, "Checkpoints and stores").
 *
 * @module
 */
import type { ChatMessage } from '../agent/messages.js';
import type { SessionKey, StoreContext } from '../events/event-log.js';

/**
 * Keeps each session's conversation. Implementations: {@link createMemorySessionStore},
 * `createSqliteSessionStore` from `runplane/stores/sqlite`.
 *
 * @remarks A run appends what it produced in one call, so a history never holds half a run's
 * write: with the reference agent, never an assistant tool call without its result.
 * Failures reject with a {@link RunplaneError} of code `STORE_FAILED`.
 */
export interface SessionStore {
  /**
   * Reads a session's history, oldest first (empty for an unknown session).
   *
   * @throws {@link RunplaneError} (`STORE_FAILED`) when the store fails or holds a corrupt message
   */
  load(ctx: StoreContext, key: SessionKey): Promise<ChatMessage[]>;
  /**
   * Appends messages to a session's history, all or none.
   *
   * @throws {@link RunplaneError} (`STORE_FAILED`) when the store fails
   */
  append(ctx: StoreContext, key: SessionKey, messages: readonly ChatMessage[]): Promise<void>;
  /** Deletes a session's history. */
  clear(ctx: StoreContext, key: SessionKey): Promise<void>;
}

/**
 * A run's view of its session's history (`ctx.history`).
 *
 * @remarks A failure is logged as a `session.error` event (even after the run ended, so it is
 * never lost) and rejects with a {@link RunplaneError} of code `STORE_FAILED`.
 */
export interface SessionHistory {
  /** The session's history, oldest first. */
  load(): Promise<ChatMessage[]>;
  /** Appends messages to the session's history, all or none. */
  append(messages: readonly ChatMessage[]): Promise<void>;
}
