/**
 * The runtime's public shape: the {@link Runtime} façade and its {@link RunRegistry}.
 *
 * @module
 */
import type { ApprovalDecision, PendingApproval } from '../agent/approvals.js';
import type { Clock } from '../clock.js';
import type { EventLog, RunplaneEvent, SessionKey } from '../events/event-log.js';
import type { RuntimeInbox } from '../inbox/inbox.js';
import type { AgentRun, CancelOptions } from '../run/agent-run.js';
import type { Session } from '../session/session.js';
import type { SessionStore } from '../stores/session-store.js';
import type { PrepareOptions } from './runtime-options.js';

/** The live-run registry: find and control runs by (ownerId, sessionId, runId). */
export interface RunRegistry {
  /** A live run, or `undefined` (also for a wrong owner or session). */
  find(ownerId: string, sessionId: string, runId: string): AgentRun<unknown> | undefined;
  /**
   * Cancels exactly that run.
   *
   * @returns `'accepted'` (live), `'ended'` (it existed and is over) or `'not_found'` (never
   *   existed for this owner and session)
   */
  cancel(
    ownerId: string,
    sessionId: string,
    runId: string,
    options?: CancelOptions,
  ): 'accepted' | 'not_found' | 'ended';
  /** Interrupts exactly that run; same answers as {@link RunRegistry.cancel}. */
  interrupt(
    ownerId: string,
    sessionId: string,
    runId: string,
    message?: string,
  ): 'accepted' | 'not_found' | 'ended';
  /** Number of live (not yet settled) runs. */
  readonly size: number;
}

/** A runplane runtime. */
export interface Runtime {
  /** The clock every timer runs on. */
  readonly clock: Clock;
  /** The event log all sessions write to. */
  readonly eventLog: EventLog;
  /** The live-run registry. */
  readonly runs: RunRegistry;
  /** The session store that keeps every session's conversation history. */
  readonly sessionStore: SessionStore;
  /** Hints for running agents: `runtime.inbox.push(ownerId, sessionId, hint)` → hint id. */
  readonly inbox: RuntimeInbox;
  /**
   * Answers a tool approval that a run of that session waits for (`agent.approval_requested`).
   *
   * @remarks A denial is not a cancel: the tool gets an error result carrying `message` and the
   * run goes on (AgentScope's tool confirmation). Only the owner of the session can answer.
   * @param ownerId - the authenticated owner
   * @param sessionId - the session
   * @param toolUseId - the `tool_use_id` of the request
   * @param decision - `{ allow, message? }`
   * @returns `'accepted'`, or `'not_found'` when no such request waits (answered, withdrawn,
   *   never asked, or another owner's)
   * @throws {@link InvalidArgumentError} (`INVALID_ARGUMENT`) for an empty id or a non-boolean `allow`
   */
  approve(
    ownerId: string,
    sessionId: string,
    toolUseId: string,
    decision: ApprovalDecision,
  ): 'accepted' | 'not_found';
  /**
   * The approvals waiting in a session, oldest first (e.g. to redraw a confirmation dialog).
   *
   * @param ownerId - the authenticated owner
   * @param sessionId - the session
   * @returns `{ toolUseId, name, args, runId, at }` per waiting request
   */
  pendingApprovals(ownerId: string, sessionId: string): PendingApproval[];
  /**
   * Creates a run in status CREATED, already registered: its actor is spawned as a child of the
   * session's actor. Call `start()` (or `stream()`) to queue it.
   *
   * @throws {@link InvalidArgumentError} (`INVALID_ARGUMENT`) naming the bad field, or for a
   *   `runId` already used
   * @throws {@link SessionQueueFullError} (`SESSION_QUEUE_FULL`) when the session already holds
   *   `maxQueuedRuns` runs that have not settled
   * @throws {@link ShuttingDownError} (`SHUTTING_DOWN`) after `shutdown()` began
   */
  prepare<TInput, TOutput>(options: PrepareOptions<TInput, TOutput>): AgentRun<TOutput>;
  /** The handle of one session. */
  session(ownerId: string, sessionId: string): Session;
  /**
   * Subscribes to every logged event of every session. A throwing listener is reported and
   * cannot affect any run.
   *
   * @returns an unsubscribe function
   */
  onEvent(listener: (event: RunplaneEvent, key: SessionKey) => void): () => void;
  /**
   * Hands an error that must not escape (a throwing listener or inspector, a failing store
   * write) to the `reportError` option (default: `console.error`). Never throws.
   */
  reportError(error: unknown): void;
  /**
   * Stops gracefully: refuses new runs, cancels CREATED and QUEUED runs (cause `shutdown`),
   * interrupts RUNNING ones, waits `graceMs`, cancels what is left, stops every actor.
   *
   * @returns `{ drained }`: true when every running run finished on its own within `graceMs`
   */
  shutdown(options?: { graceMs?: number }): Promise<{ drained: boolean }>;
}
