/**
 * The session inbox: hints (supplements) pushed while a run works, read at its next reasoning
 * step (docs/architecture.md, "Use and vocabulary", §7, §9).
 *
 * @remarks Follows AgentScope's Harness inbox (`MessageBus.inboxPush`), with two differences:
 * the key is (ownerId, sessionId), so one owner can never read another's hints, and the
 * reference agent puts a drained hint into the very model request of that step (AgentScope's
 * can miss it and reach only a later one).
 *
 * @module
 */
import type { SessionKey, StoreContext } from '../events/event-log.js';

/** A hint as a producer gives it: its text, or its text and a source label. */
export type HintInput = string | { readonly text: string; readonly source?: string | undefined };

/** A stored hint. */
export interface Hint {
  /** The hint id (nanoid), named by the `agent.hint_consumed` event that reports its use. */
  readonly id: string;
  readonly text: string;
  /** A label of where it came from (not an identity). @default 'user-supplement' */
  readonly source: string;
  /** When it was pushed, clock ms. */
  readonly at: number;
}

/**
 * The inbox store: a FIFO of hints per session. Implementations: memory (here), SQLite
 * (`stores/sqlite/inbox.ts`) and a cluster holder's (`cluster/redis-inbox.ts`).
 *
 * @remarks Synchronous like {@link EventLog.append}, so a push is ordered against the drain
 * of a running step: a hint is either in that step's request or waits for the next one.
 */
export interface Inbox {
  /** Appends a hint to the session's inbox. */
  push(ctx: StoreContext, key: SessionKey, hint: Hint): void;
  /** Removes and returns every hint of the session, oldest first. */
  drain(ctx: StoreContext, key: SessionKey): Hint[];
  /** How many hints wait in the session's inbox. */
  size(ctx: StoreContext, key: SessionKey): number;
}

/** The inbox as `runtime.inbox` exposes it to producers. */
export interface RuntimeInbox {
  /**
   * Pushes a hint into a session's inbox. It is read at the next reasoning step of that
   * session's active run, or by the next run when none is active.
   *
   * @param ownerId - the authenticated owner
   * @param sessionId - the session
   * @param hint - its text, or `{ text, source }`
   * @returns the hint id
   * @throws {@link InvalidArgumentError} (`INVALID_ARGUMENT`) for an empty owner, session or text
   */
  push(ownerId: string, sessionId: string, hint: HintInput): string;
  /** How many hints wait in that session's inbox. */
  size(ownerId: string, sessionId: string): number;
}

/** The inbox as a running agent sees it (`ctx.inbox`): its own session's hints only. */
export interface RunInbox {
  /** Removes and returns the session's waiting hints, oldest first. */
  drain(): Hint[];
}
