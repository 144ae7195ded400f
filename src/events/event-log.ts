/**
 * The event log: per-session, append-only, with a strictly increasing `seq` cursor
 * (docs/architecture.md, "Event log and HTTP service"). Readers resume from any `seq`; nothing ever rewinds it.
 *
 * @module
 */

/** Identifies a session's log. A log is never shared between owners. */
export interface SessionKey {
  readonly ownerId: string;
  readonly sessionId: string;
}

/**
 * The map key of a session: length-prefixed, so no choice of ids can make two sessions of
 * different owners share a key (`'a\0b' + 'c'` and `'a' + 'b\0c'` stay apart).
 */
export function toSessionKeyString(key: SessionKey): string {
  return `${key.ownerId.length}:${key.ownerId}${key.sessionId.length}:${key.sessionId}`;
}

/** Context first, as every store method takes it: an optional `signal` to give up waiting. */
export interface StoreContext {
  readonly signal?: AbortSignal | undefined;
}

/**
 * One logged event. `seq` starts at 1 per session and only grows; `at` is clock ms.
 *
 * @remarks Types are dot-namespaced: `session.run_queued`, `session.run_started`, `run.status`,
 * `run.completed`, `run.failed`, `run.cancelled`, `run.unsettled`, `run.resumed` (a cluster's
 * failover policy `resume`), `agent.*`, `session.error`.
 */
export interface RunplaneEvent {
  readonly seq: number;
  readonly id: string;
  readonly sessionId: string;
  readonly runId?: string | undefined;
  readonly type: string;
  readonly payload: Readonly<Record<string, unknown>>;
  readonly at: number;
}

/** What a writer gives {@link EventLog.append}; the log assigns `seq`, `id` and `sessionId`. */
export interface NewEvent {
  readonly runId?: string | undefined;
  readonly type: string;
  readonly payload?: Readonly<Record<string, unknown>> | undefined;
  readonly at: number;
}

/** Filters for {@link EventLog.read} and {@link EventLog.follow}. */
export interface ReadOptions {
  /** Exclusive lower bound on `seq`; 0 (the default) reads from the start. */
  readonly after?: number | undefined;
  /** At most this many events. @default unlimited */
  readonly limit?: number | undefined;
  /** Only events of this run. */
  readonly runId?: string | undefined;
  /** Only events whose type is in this list. */
  readonly types?: readonly string[] | undefined;
}

/** A per-session append-only log. Implementations: memory (here), SQLite, Redis. */
export interface EventLog {
  /**
   * Appends one event. Synchronous, so runtime writes keep their order.
   *
   * @returns the stored event, with its new `seq`
   */
  append(ctx: StoreContext, key: SessionKey, event: NewEvent): RunplaneEvent;
  /** Reads stored events after `options.after`, oldest first. */
  read(ctx: StoreContext, key: SessionKey, options?: ReadOptions): Promise<RunplaneEvent[]>;
  /**
   * Replays from `options.after`, then follows live appends until `ctx.signal` aborts (the
   * iterator then ends without throwing).
   */
  follow(ctx: StoreContext, key: SessionKey, options?: ReadOptions): AsyncIterable<RunplaneEvent>;
  /** Whether `runId` ever logged an event in this session (answers `ended` vs `not_found`). */
  hasRun(ctx: StoreContext, key: SessionKey, runId: string): boolean;
  /** The last `seq` of the session, 0 when empty. */
  lastSeq(ctx: StoreContext, key: SessionKey): number;
}
