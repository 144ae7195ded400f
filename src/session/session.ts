/**
 * The handle users get from `runtime.session(ownerId, sessionId)`.
 *
 * @module
 */

/**
 * A session's handle: one conversation's queue of runs (docs/architecture.md, "Sessions and the busy-session rule").
 *
 * @remarks A handle stays valid after the session actor was evicted for idleness; it reaches
 * whatever actor is live for its key.
 */
export interface Session {
  readonly ownerId: string;
  readonly sessionId: string;
  /** The RUNNING run admitted by this session, if any. */
  readonly activeRunId: string | undefined;
  /** Runs waiting their turn, in start order. */
  readonly queuedRunIds: string[];
  /**
   * Whether the session's machine is busy (a run active, or runs waiting for a runtime slot):
   * a run started now with strategy `reject` would be refused with `SESSION_BUSY`.
   */
  readonly busy: boolean;
  /**
   * Interrupts the active run. When idle, does nothing and remembers nothing.
   *
   * @returns `'accepted'` when a run was interrupted, else `'idle'`
   */
  interrupt(message?: string): 'accepted' | 'idle';
  /**
   * Cancels every queued run and, with `includeActive`, the active one (cause `cancel`).
   *
   * @returns how many runs this call cancelled
   */
  cancelAll(options?: { includeActive?: boolean }): number;
  /** Resolves once no run is active or queued. */
  onIdle(): Promise<void>;
}
