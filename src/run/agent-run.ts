/**
 * AgentRun: the handle of one run. The run itself is an actor, a child of its session (see
 * docs/architecture.md, "A run's life"); this handle reads its status from that actor and sends
 * it commands.
 *
 * @module
 */
import { CancelMode, isCancelMode, type CancelModeValue } from '../../machines/cancel-request.js';
import { terminalRunStatuses, type RunStatus } from '../../machines/run.types.js';
import { z } from 'zod';
import { RunAlreadyStartedError, RunCancelledError, SessionBusyError } from '../errors.js';
import type { RunplaneEvent } from '../events/event-log.js';
import { durationMs, isOptionalDurationMs, isStrictObjectOf, parseOptions } from '../validation.js';
import type { RunExecutor } from './run-executor.js';
import type { CancelResult, RunOutcome } from './run-outcome.js';

/** Options of {@link AgentRun.cancel}. */
export interface CancelOptions {
  /**
   * {@link CancelMode}: `Immediate` (0), or safe-point bits (`AfterChatModel`,
   * `AfterToolCalls`, `AnySafePoint`). @default CancelMode.Immediate
   */
  readonly mode?: CancelModeValue;
  /** For a safe-point cancel: escalate to immediate after this many ms. @default no deadline */
  readonly timeoutMs?: number;
  /** Also cancel nested runs started with `ctx.spawn`. @default false for safe-point, true for immediate */
  readonly recursive?: boolean;
  /** A short human reason, kept in the outcome and the `run.cancelled` event. */
  readonly reason?: string;
}

const cancelOptionsSchema = z.strictObject({
  mode: z
    .custom<CancelModeValue>(isCancelMode, {
      error: 'a CancelMode (Immediate 0, AfterChatModel 1, AfterToolCalls 2, AnySafePoint 3)',
    })
    .optional(),
  timeoutMs: durationMs.optional(),
  recursive: z.boolean({ error: 'a boolean' }).optional(),
  reason: z.string({ error: 'a string' }).optional(),
});

const cancelKeys: ReadonlySet<string> = new Set(Object.keys(cancelOptionsSchema.shape));

/** The fast path of `cancelOptionsSchema`: accepts only what it accepts (see `parseOptions`). */
const isValidCancel = (value: unknown): value is z.infer<typeof cancelOptionsSchema> => {
  if (!isStrictObjectOf(value, cancelKeys)) return false;
  const { mode, timeoutMs, recursive, reason } = value as Record<string, unknown>;
  return (
    (mode === undefined || isCancelMode(mode)) &&
    isOptionalDurationMs(timeoutMs) &&
    (recursive === undefined || typeof recursive === 'boolean') &&
    (reason === undefined || typeof reason === 'string')
  );
};

/** @internal The cancel options' schema and its fast path, for the test that holds them equal. */
export const cancelFastPath = { schema: cancelOptionsSchema, isValid: isValidCancel };

/** Why `events()` stops following the log (the reason of an internal signal, never thrown). */
const followStopped = 'events() stopped following';

/**
 * @internal The executor of `run` (for the runtime and the TurnLoop: full cancel requests).
 * @throws TypeError for an object that is not a run handle
 */
export function executorOf(run: AgentRun<unknown>): RunExecutor {
  return AgentRun.executorOf(run);
}

/**
 * One execution of an agent. Created by `runtime.prepare(...)` in status CREATED, already
 * registered (so it can be found and cancelled before it starts).
 *
 * @remarks Semantics follow AgentScope's AgentRun, on an XState actor: the first terminal status
 * wins; every command reports what it did; observing a run never cancels it, owning it
 * (`stream()`) does. `termination` resolves only when the agent has settled, so a caller that
 * starts a new run right after can never race the old one.
 */
export class AgentRun<TOutput = unknown> {
  /** The run id (nanoid), never reused. */
  readonly id: string;
  readonly ownerId: string;
  readonly sessionId: string;
  /** The run that spawned this one with `ctx.spawn`, if any. */
  readonly parentRunId: string | undefined;
  /**
   * Resolves once the run is terminal **and** its agent has settled (or was abandoned after
   * `unwindTimeoutMs`), and its nested runs have settled. Never rejects.
   */
  readonly termination: Promise<RunOutcome<TOutput>>;

  readonly #run: RunExecutor;

  /** Runs are made by `runtime.prepare(...)` (see {@link AgentRun.of}). */
  private constructor(executor: RunExecutor) {
    this.#run = executor;
    this.id = executor.id;
    this.ownerId = executor.ownerId;
    this.sessionId = executor.sessionId;
    this.parentRunId = executor.parentRunId;
    this.termination = executor.termination as Promise<RunOutcome<TOutput>>;
  }

  /** @internal The handle of `executor` (the runtime makes one per run). */
  static of<TOutput>(executor: RunExecutor): AgentRun<TOutput> {
    return new AgentRun<TOutput>(executor);
  }

  /** @internal See {@link executorOf}. */
  static executorOf(run: AgentRun<unknown>): RunExecutor {
    if (!(#run in run)) throw new TypeError('not an AgentRun made by a runplane runtime');
    return run.#run;
  }

  /** The current status: `CREATED | QUEUED | RUNNING | COMPLETED | FAILED | CANCELLED`. */
  get status(): RunStatus {
    return this.#run.status;
  }

  /** Whether the run was started (by `start()` or `stream()`; a nested run by its spawn). */
  get started(): boolean {
    return this.#run.started;
  }

  /**
   * Whether the agent was ever invoked: false for a run that ended before RUNNING (cancelled
   * while CREATED or QUEUED, or timed out in the queue).
   */
  get agentStarted(): boolean {
    return this.#run.agentStarted;
  }

  /** The state the agent passed to its latest `ctx.safePoint(kind, state)`. */
  get safePointState(): unknown {
    return this.#run.safePointState;
  }

  /** What the agent asked for with `ctx.suspend(request)`, once it did (`ctx.suspend`). */
  get suspension(): { readonly request: unknown } | undefined {
    return this.#run.suspension;
  }

  /**
   * Starts the run: its session decides at once whether it runs now or waits in line (in start
   * order), following the run's `strategy`.
   *
   * @throws {@link RunAlreadyStartedError} (`RUN_ALREADY_STARTED`) on a second call
   * @throws {@link SessionBusyError} (`SESSION_BUSY`) when the strategy is `reject` and the
   *   session has work; the run is then CANCELLED
   */
  start(): void {
    const run = this.#run;
    if (run.started) throw new RunAlreadyStartedError(this.id);
    run.started = true;
    if (run.status !== 'CREATED') return; // cancelled before start: nothing to run
    const activeRunId = run.host.startInSession(run);
    if (run.rejected) throw new SessionBusyError(this.sessionId, activeRunId);
  }

  /**
   * Waits for the outcome. Never starts the run.
   *
   * @returns the agent's output
   * @throws {@link RunCancelledError} with code `RUN_CANCELLED`, or `RUN_TIMEOUT` after the deadline
   * @throws whatever the agent threw, for a FAILED run
   */
  async result(): Promise<TOutput> {
    const outcome = await this.termination;
    if (outcome.status === 'COMPLETED') return outcome.output;
    if (outcome.status === 'FAILED') throw outcome.error;
    throw new RunCancelledError(this.id, outcome.cause, outcome.reason);
  }

  /**
   * Cancels the run, immediately or at a safe point.
   *
   * @remarks Requests merge as in Eino: immediate dominates, safe-point bits OR, the earliest
   * deadline wins, `recursive` only goes false → true. A CREATED or QUEUED run is cancelled at
   * once whatever the mode. On a terminal run nothing happens and the outcome is `'ended'`.
   *
   * @param options - {@link CancelOptions}
   * @returns `{ contributed, outcome }`: whether the request changed anything, and a promise
   *   of `'cancelled' | 'escalated' | 'ended'`
   * @throws {@link InvalidArgumentError} (`INVALID_ARGUMENT`) for a bad `mode` or `timeoutMs`
   */
  cancel(options: CancelOptions = {}): CancelResult {
    const {
      mode = CancelMode.Immediate,
      timeoutMs,
      recursive,
      reason,
    } = parseOptions(cancelOptionsSchema, options, 'options', isValidCancel);
    return this.#run.cancelWith({
      mode,
      deadlineAt:
        mode !== CancelMode.Immediate && timeoutMs !== undefined
          ? this.#run.clock.now() + timeoutMs
          : undefined,
      recursive: recursive ?? mode === CancelMode.Immediate,
      cause: 'cancel',
      reason,
      initiator: 'user',
    });
  }

  /**
   * Asks the agent to finish early (cooperative). On a CREATED or QUEUED run it is a cancel.
   *
   * @param message - handed to the agent as `ctx.interruptMessage`
   * @returns whether this call contributed (false on a terminal run, or a repeated interrupt)
   */
  interrupt(message?: string): boolean {
    return this.#run.interruptWith(message, 'interrupt');
  }

  /**
   * The run's events: replayed from the log after `after`, then followed live; the iterator
   * ends after the run has terminated and settled. Leaving it early never cancels the run.
   *
   * @param options - `after`: exclusive seq cursor (default 0); `signal`: stop following
   */
  async *events(
    options: { after?: number; signal?: AbortSignal } = {},
  ): AsyncGenerator<RunplaneEvent> {
    const stop = new AbortController();
    // A plain reason: `abort()` without one builds a DOMException (and its stack) per follower.
    const forward = () => stop.abort(followStopped);
    const callerStopped = () => options.signal?.aborted === true;
    if (callerStopped()) return;
    options.signal?.addEventListener('abort', forward, { once: true });
    void this.termination.then(() => stop.abort(followStopped));
    const { eventLog } = this.#run.host;
    const key = { ownerId: this.ownerId, sessionId: this.sessionId };
    // Nothing of this run lies at or before the log's end when it was prepared: skip the
    // session's history instead of filtering it event by event.
    let after = Math.max(options.after ?? 0, this.#run.logFloor);
    try {
      for await (const event of eventLog.follow({ signal: stop.signal }, key, {
        after,
        runId: this.id,
      })) {
        after = event.seq;
        yield event;
      }
      if (callerStopped()) return;
      // Terminated: drain what was appended up to settlement.
      for (const event of await eventLog.read({}, key, { after, runId: this.id })) {
        yield event;
      }
    } finally {
      options.signal?.removeEventListener('abort', forward);
    }
  }

  /**
   * Starts the run and yields its events; leaving the loop before the run ends cancels it
   * (the owner form, once per run).
   *
   * @throws {@link RunAlreadyStartedError} (`RUN_ALREADY_STARTED`) if the run was started
   */
  stream(): AsyncGenerator<RunplaneEvent> {
    this.start();
    const inner = this.events();
    const cancelIfLive = () => {
      if (!terminalRunStatuses.has(this.status)) this.cancel({ reason: 'stream closed' });
    };
    const owner: AsyncGenerator<RunplaneEvent> = {
      next: () => inner.next(),
      return: async (value) => {
        cancelIfLive();
        return inner.return(value);
      },
      throw: async (error) => {
        cancelIfLive();
        return inner.throw(error);
      },
      [Symbol.asyncIterator]() {
        return owner;
      },
    } as AsyncGenerator<RunplaneEvent>;
    return owner;
  }
}
