/**
 * Typed errors. Every error runplane throws or rejects with is a {@link RunplaneError} with a
 * stable `code`; the code also opens the message (`RUN_CANCELLED: run abc was cancelled`).
 *
 * @module
 */
import type { CancelCause } from '../machines/cancel-request.js';

/** Every code a {@link RunplaneError} can carry (docs/architecture.md, "Errors"). */
export type RunplaneErrorCode =
  | 'RUN_ALREADY_STARTED'
  | 'RUN_CANCELLED'
  | 'RUN_TIMEOUT'
  | 'RUN_SUSPENDED'
  | 'SESSION_BUSY'
  | 'SESSION_QUEUE_FULL'
  | 'NOT_FOUND'
  | 'INVALID_ARGUMENT'
  | 'LATE_ITEMS_TAKEN'
  | 'CHECKPOINT_CORRUPT'
  | 'STORE_FAILED'
  | 'SHUTTING_DOWN'
  | 'MODEL_ERROR'
  | 'CONTEXT_OVER_BUDGET'
  | 'STALE_FENCE'
  | 'OUTBOX_FULL'
  | 'COMMAND_TIMEOUT'
  | 'HISTORY_TOO_LARGE';

/**
 * The base class of every runplane error.
 *
 * @remarks `code` is the field to branch on; `message` starts with it; `cause` is kept.
 */
export class RunplaneError extends Error {
  /** The stable, machine-readable kind of failure. */
  readonly code: RunplaneErrorCode;

  /**
   * @param code - the error's {@link RunplaneErrorCode}
   * @param message - a human sentence, without the code (it is prefixed)
   * @param options - `{ cause }`, kept as `error.cause`
   */
  constructor(code: RunplaneErrorCode, message: string, options?: { cause?: unknown }) {
    super(`${code}: ${message}`, options);
    this.name = new.target.name;
    this.code = code;
  }
}

/** `start()` (or `stream()`) was called on a run that was already started. Code `RUN_ALREADY_STARTED`. */
export class RunAlreadyStartedError extends RunplaneError {
  constructor(readonly runId: string) {
    super('RUN_ALREADY_STARTED', `run ${runId} was already started`);
  }
}

/**
 * The run was cancelled. Code `RUN_CANCELLED`, or `RUN_TIMEOUT` when its total deadline passed.
 *
 * @remarks Thrown into the agent by `ctx.safePoint()` when a pending cancel lands there, and
 * the rejection of `run.result()` for a cancelled run.
 */
export class RunCancelledError extends RunplaneError {
  constructor(
    readonly runId: string,
    /** Why the run was cancelled (named `cancelCause`: `cause` is the standard error chain). */
    readonly cancelCause: CancelCause,
    readonly reason?: string,
  ) {
    super(
      cancelCause === 'timeout' ? 'RUN_TIMEOUT' : 'RUN_CANCELLED',
      cancelCause === 'timeout'
        ? `run ${runId} passed its deadline`
        : `run ${runId} was cancelled (${cancelCause}${reason ? `: ${reason}` : ''})`,
    );
  }
}

/**
 * @internal The reason a run's AbortSignal fires with: a {@link RunCancelledError} built without
 * a stack trace.
 *
 * @remarks The abort fires inside the run actor's transition, so a captured stack would hold
 * XState's frames only, never the caller of `cancel()`; the error's fields say who cancelled
 * and why. Capturing it cost about a tenth of a cancel's latency.
 */
export function createAbortReason(
  runId: string,
  cancelCause: CancelCause,
  reason: string | undefined,
): RunCancelledError {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return new RunCancelledError(runId, cancelCause, reason);
  } finally {
    Error.stackTraceLimit = limit;
  }
}

/** The session already has work and the run's strategy is `reject`. Code `SESSION_BUSY`. */
export class SessionBusyError extends RunplaneError {
  constructor(
    readonly sessionId: string,
    readonly activeRunId: string | undefined,
  ) {
    super(
      'SESSION_BUSY',
      `session ${sessionId} is busy with run ${activeRunId ?? '(queued work)'}`,
    );
  }
}

/**
 * A session (or a parent run, for nested runs) already holds its cap of runs that have not
 * settled: prepared, queued and running ones. Code `SESSION_QUEUE_FULL`.
 *
 * @remarks Every run is a child actor of its session, and XState copies a parent's children on
 * every spawn and stop: the cap (`maxQueuedRuns`) keeps a run's cost flat (README "Limits").
 */
export class SessionQueueFullError extends RunplaneError {
  constructor(
    readonly sessionId: string,
    /** The cap that was reached. */
    readonly maxQueuedRuns: number,
    /** For a nested run: the parent run whose cap was reached. */
    readonly parentRunId?: string,
  ) {
    super(
      'SESSION_QUEUE_FULL',
      parentRunId === undefined
        ? `session ${sessionId} already holds ${maxQueuedRuns} runs that have not settled; wait for one to end`
        : `run ${parentRunId} already holds ${maxQueuedRuns} nested runs that have not settled; wait for one to end`,
    );
  }
}

/** An argument or option is invalid. Code `INVALID_ARGUMENT`; `field` names it. */
export class InvalidArgumentError extends RunplaneError {
  constructor(
    readonly field: string,
    message: string,
  ) {
    super('INVALID_ARGUMENT', message);
  }
}

/** The runtime is shutting down and takes no new work. Code `SHUTTING_DOWN`. */
export class ShuttingDownError extends RunplaneError {
  constructor() {
    super('SHUTTING_DOWN', 'the runtime is shutting down and accepts no new runs');
  }
}

// ---- TurnLoop and checkpoint errors ------------------------------------------------------------

/**
 * A turn of a TurnLoop was cancelled. Code `RUN_CANCELLED` (`RUN_TIMEOUT` for a timed-out run).
 *
 * @remarks The `exitReason` of a loop whose stop cancelled its last turn (Eino's CancelError
 * propagated as ExitReason); `escalated` says whether a safe-point cancel hit its deadline.
 */
export class TurnCancelledError extends RunCancelledError {
  constructor(
    runId: string,
    /** The turn whose run was cancelled. */
    readonly turnId: string,
    cancelCause: CancelCause,
    reason: string | undefined,
    /** True when a safe-point cancel (graceful stop, preempt) escalated to immediate. */
    readonly escalated: boolean,
  ) {
    super(runId, cancelCause, reason);
  }
}

/**
 * The agent suspended its run for outside input with `ctx.suspend(request)`. Code
 * `RUN_SUSPENDED`.
 *
 * @remarks Thrown by `ctx.suspend` (Eino's business interrupt, `compose.Interrupt`'s error):
 * let it propagate out of `execute`. The run ends FAILED with it; a TurnLoop reads it as the
 * turn's suspension (`exitReason: 'suspended'`), not as a failure.
 */
export class RunSuspendedError extends RunplaneError {
  constructor(
    /** The suspended run. */
    readonly runId: string,
    /** What the agent asks for (JSON data, frozen). */
    readonly request: unknown,
  ) {
    super('RUN_SUSPENDED', `run ${runId} suspended for outside input`);
  }
}

/**
 * A push after the loop stopped, once its late items were taken. Code `LATE_ITEMS_TAKEN`.
 *
 * @remarks Thrown by `loop.push()` so that an item pushed after `exit.takeLateItems()` is never
 * silently lost (Eino panics in the same case).
 */
export class LateItemsTakenError extends RunplaneError {
  constructor() {
    super(
      'LATE_ITEMS_TAKEN',
      'the turn loop has stopped and its late items were taken: this push would be lost',
    );
  }
}

/** A stored checkpoint cannot be read: bad encoding, bad shape or unknown version. Code `CHECKPOINT_CORRUPT`. */
export class CheckpointCorruptError extends RunplaneError {
  constructor(
    /** The id the checkpoint is stored under; it is left in place. */
    readonly checkpointId: string,
    detail: string,
    options?: { cause?: unknown },
  ) {
    super('CHECKPOINT_CORRUPT', `checkpoint ${checkpointId} is unreadable: ${detail}`, options);
  }
}

/** A store operation failed; the store's own error is `cause`. Code `STORE_FAILED`. */
export class StoreFailedError extends RunplaneError {
  constructor(
    /**
     * What was attempted: `get`, `set`, `delete`, `append` or `load` (an incremental store), or
     * `encode` (the codec failed).
     */
    readonly operation: 'get' | 'set' | 'delete' | 'append' | 'load' | 'encode',
    /** The key involved (a checkpoint id). */
    readonly key: string,
    cause: unknown,
  ) {
    super(
      'STORE_FAILED',
      `${operation} of ${key} failed: ${cause instanceof Error ? cause.message : String(cause)}`,
      { cause },
    );
  }
}

// ---- Cluster errors ------------------------------------------------------------------------------

/**
 * Why an instance stopped holding a session's lease (see {@link StaleFenceError}):
 * - `not_held`: the instance never took the lease, or already gave it up;
 * - `renew_refused`: a renew found the lease gone or naming another holder;
 * - `deadline_passed`: no renew succeeded before the holder's local deadline (it fenced itself
 *   without waiting for Redis);
 * - `write_refused`: Redis refused a batch: the lease or the fence is no longer this holder's;
 * - `seq_conflict`: Redis refused a batch whose first `seq` does not follow the stored one.
 */
export type LeaseLossReason =
  'not_held' | 'renew_refused' | 'deadline_passed' | 'write_refused' | 'seq_conflict';

/**
 * This instance's claim on a session is stale: it does not (or no longer) hold the session's
 * lease under `fence`, so it must not drive the session. Code `STALE_FENCE`.
 *
 * @remarks The holder of a lease writes through scripts that compare the lease and the fence
 * with its own; Redis refuses a stale writer's batch and leaves the session untouched
 * (docs/architecture.md, "Cluster on Redis"). `reason` says how the loss was noticed.
 */
export class StaleFenceError extends RunplaneError {
  constructor(
    readonly ownerId: string,
    readonly sessionId: string,
    /** The fence this instance held, or 0 when it held none. */
    readonly fence: number,
    readonly reason: LeaseLossReason,
    detail?: string,
  ) {
    super(
      'STALE_FENCE',
      `session ${sessionId} of ${ownerId} is no longer held under fence ${fence} (${reason}${detail === undefined ? '' : `: ${detail}`})`,
    );
  }
}

/**
 * A session's outbox (its writes not yet acknowledged by Redis) passed its bound, so the
 * instance stopped the session rather than hold more memory. Code `OUTBOX_FULL`.
 */
export class OutboxFullError extends RunplaneError {
  constructor(
    readonly ownerId: string,
    readonly sessionId: string,
    /** The bound that was passed: `entries` or `bytes`. */
    readonly limit: 'entries' | 'bytes',
    /** The bound's value. */
    readonly max: number,
  ) {
    super(
      'OUTBOX_FULL',
      `session ${sessionId} of ${ownerId} has more than ${max} ${limit} waiting for Redis; the session is stopped`,
    );
  }
}

/**
 * A session history write was refused because it would pass a bound of the store: one append's
 * bytes (`append`) or the history's total bytes (`history`). Nothing was written. Code
 * `HISTORY_TOO_LARGE`.
 *
 * @remarks Bytes are those of the messages' JSON in UTF-8. The cluster's session store keeps
 * its histories in Redis's memory, so it bounds them (docs/architecture.md, "Cluster on Redis").
 */
export class HistoryTooLargeError extends RunplaneError {
  constructor(
    readonly ownerId: string,
    readonly sessionId: string,
    /** The bound that would be passed. */
    readonly limit: 'append' | 'history',
    /** The bound's value, in bytes. */
    readonly maxBytes: number,
    /** The bytes the write would have made (the append's, or the history's after it). */
    readonly bytes: number,
  ) {
    super(
      'HISTORY_TOO_LARGE',
      limit === 'append'
        ? `an append of ${bytes} bytes to session ${sessionId} of ${ownerId} is over the ${maxBytes}-byte bound of one append; nothing was written`
        : `session ${sessionId} of ${ownerId} would hold ${bytes} bytes of history, over its ${maxBytes}-byte bound; nothing was written`,
    );
  }
}

/**
 * Whether `error`, or any error in its `cause` chain, is a cancellation.
 *
 * @example
 * ```ts
 * try { await run.result(); } catch (e) { if (isCancellation(e)) console.log('stopped'); }
 * ```
 */
export function isCancellation(error: unknown): boolean {
  const seen = new Set<unknown>();
  let current: unknown = error;
  while (current instanceof Error && !seen.has(current)) {
    if (current instanceof RunCancelledError) return true;
    if (current.name === 'AbortError') return true;
    seen.add(current);
    current = current.cause;
  }
  return false;
}

/**
 * A command sent to the instance that holds its session was not answered within the bound.
 * Code `COMMAND_TIMEOUT`.
 *
 * @remarks The command stays in the session's command Stream, so it may still be applied: its
 * outcome is unknown, and a client reads the session before it retries (docs/architecture.md,
 * "Cluster on Redis").
 */
export class CommandTimeoutError extends RunplaneError {
  constructor(
    readonly ownerId: string,
    readonly sessionId: string,
    /** The id the command was sent with. */
    readonly requestId: string,
    /** How long the sender waited, in ms of the cluster's clock. */
    readonly waitedMs: number,
  ) {
    super(
      'COMMAND_TIMEOUT',
      `no answer within ${waitedMs} ms from the instance holding session ${sessionId} of ${ownerId} (request ${requestId}); the command may still be applied`,
    );
  }
}
