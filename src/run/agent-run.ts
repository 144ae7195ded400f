/**
 * AgentRun: the handle of one run, wrapping its run-machine actor (DESIGN.md §5, §16).
 *
 * @module
 */
import { createActor, type Actor, type SnapshotFrom } from 'xstate';
import {
  CancelMode,
  isCancelMode,
  type CancelCause,
  type CancelModeValue,
  type CancelRequest,
  type SafePointKind,
} from '../../machines/cancel-request.js';
import {
  terminalRunStatuses,
  type RunMachineEvent,
  type RunStatus,
} from '../../machines/run.machine.js';
import { z } from 'zod';
import type { AgentServices } from '../agent/agent-services.js';
import type { Clock } from '../clock.js';
import {
  createAbortReason,
  InvalidArgumentError,
  RunAlreadyStartedError,
  RunCancelledError,
} from '../errors.js';
import { durationMs, parseOptions } from '../validation.js';
import { setInspectedParent } from '../inspect/actor-parents.js';
import type { RunplaneEvent } from '../events/event-log.js';
import type { RuntimeCore, BoundRunMachine } from '../runtime/runtime-core.js';
import type { Agent, InterruptCause, SpawnOptions } from './agent.js';
import { LazyAbortController } from '../lazy-abort-controller.js';
import { createRunContext, type RunContextHost } from './run-context.js';
import type { CancelOutcome, CancelResult, RunOutcome } from './run-outcome.js';

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

/** Construction parameters of an {@link AgentRun} (internal: use `runtime.prepare`). */
export interface AgentRunInit<TInput, TOutput> {
  readonly core: RuntimeCore;
  readonly runId: string;
  readonly ownerId: string;
  readonly sessionId: string;
  readonly agent: Agent<TInput, TOutput>;
  readonly input: TInput;
  readonly timeoutMs: number | undefined;
  readonly signal: AbortSignal | undefined;
  /** Set for runs started with `ctx.spawn`: they bypass the session queue. */
  readonly parent: AgentRun<unknown> | undefined;
  /** The session log's last seq when the run was prepared: none of its events lie at or before it. */
  readonly logFloor: number;
}

type RunSnapshot = SnapshotFrom<BoundRunMachine>;

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

const spawnOptionsSchema = z.strictObject({ timeoutMs: durationMs.optional() });

const noChildren: ReadonlySet<AgentRun<unknown>> = new Set();

/** Why `events()` stops following the log (the reason of an internal signal, never thrown). */
const followStopped = 'events() stopped following';

const statusOf = (snapshot: RunSnapshot): RunStatus =>
  (typeof snapshot.value === 'string'
    ? snapshot.value
    : Object.keys(snapshot.value)[0]) as RunStatus;

/** Terminal and settled: COMPLETED, FAILED, CANCELLED.settled or CANCELLED.abandoned. */
const isSettled = (snapshot: RunSnapshot): boolean => {
  // Read from the value itself: `matches` allocates, and this runs on every snapshot.
  const { value } = snapshot;
  if (typeof value === 'string') return value === 'COMPLETED' || value === 'FAILED';
  const cancelled = (value as { CANCELLED?: unknown }).CANCELLED;
  return cancelled === 'settled' || cancelled === 'abandoned';
};

/**
 * One execution of an agent. Created by `runtime.prepare(...)` in status CREATED, already
 * registered (so it can be found and cancelled before it starts).
 *
 * @remarks Semantics follow AgentScope's AgentRun, on an XState actor: the first terminal status
 * wins; every command reports what it did; observing a run never cancels it, owning it
 * (`stream()`) does. `termination` resolves only when the agent has settled, so a caller that
 * starts a new run right after can never race the old one.
 */
export class AgentRun<TOutput = unknown> implements RunContextHost {
  /** The run id (nanoid), never reused. */
  readonly id: string;
  readonly ownerId: string;
  readonly sessionId: string;
  /** The run that spawned this one with `ctx.spawn`, if any. */
  readonly parentRunId: string | undefined;
  /**
   * Resolves once the run is terminal **and** its agent has settled (or was abandoned after
   * `unwindTimeoutMs`). Never rejects.
   */
  readonly termination: Promise<RunOutcome<TOutput>>;

  readonly #core: RuntimeCore;
  readonly #agent: Agent<unknown, TOutput>;
  readonly #input: unknown;
  readonly #actor: Actor<BoundRunMachine>;
  /** Fires the run's AbortSignal, created on first use (a no-op agent never needs one). */
  readonly #abort = new LazyAbortController();
  #services: AgentServices | undefined;
  /** Aborted when an interrupt reaches the RUNNING run (`ctx.interruptSignal`). */
  #interrupt: AbortController | undefined; // created on first use: most runs never need it
  #children: Set<AgentRun<unknown>> | undefined; // created by the first ctx.spawn
  readonly #terminal: Promise<RunStatus>;
  readonly #externalSignal: AbortSignal | undefined;
  #resolveTerminal!: (status: RunStatus) => void;
  // Typed without TOutput so that AgentRun<T> stays assignable to AgentRun<unknown>.
  #resolveTermination!: (outcome: RunOutcome<unknown>) => void;
  #status: RunStatus = 'CREATED';
  #startCalled = false;
  #finished = false;
  #safePointState: unknown;
  /** Who interrupted the RUNNING run (the first interrupt's). */
  #interruptCause: InterruptCause | undefined;
  /** The session log's last seq when the run was prepared. */
  readonly #logFloor: number;

  /** @internal Use `runtime.prepare(...)`. */
  constructor(init: AgentRunInit<unknown, TOutput>) {
    this.#core = init.core;
    this.id = init.runId;
    this.ownerId = init.ownerId;
    this.sessionId = init.sessionId;
    this.parentRunId = init.parent?.id;
    this.#agent = init.agent;
    this.#input = init.input;
    this.#externalSignal = init.signal;
    this.#logFloor = init.logFloor;
    this.termination = new Promise<RunOutcome<TOutput>>((resolve) => {
      this.#resolveTermination = resolve as (outcome: RunOutcome<unknown>) => void;
    });
    this.#terminal = new Promise((resolve) => (this.#resolveTerminal = resolve));
    this.#actor = createActor(init.core.runMachine, {
      input: {
        runId: init.runId,
        ownerId: init.ownerId,
        sessionId: init.sessionId,
        timeoutMs: init.timeoutMs,
        unwindTimeoutMs: init.core.unwindTimeoutMs,
      },
      clock: init.core.clock,
      inspect: init.core.inspect,
    });
    // Runs are root actors: tell the timeline which run a nested one belongs to.
    if (init.parent !== undefined) setInspectedParent(this.#actor, init.parent.id);
    this.#actor.subscribe({
      next: (snapshot) => this.#onSnapshot(snapshot),
      error: (error) => this.#onActorError(error),
    });
  }

  /** @internal Called by the runtime right after registration. */
  activate(): void {
    this.#actor.start();
    const signal = this.#externalSignal;
    if (signal === undefined) return;
    const onAbort = () => {
      const { reason } = signal as { reason: unknown };
      const text =
        reason instanceof Error ? reason.message : typeof reason === 'string' ? reason : undefined;
      this.#send({
        type: 'run.cancel',
        request: this.#request('signal', CancelMode.Immediate, text ?? 'external signal aborted'),
      });
    };
    if (signal.aborted) {
      onAbort();
      return;
    }
    signal.addEventListener('abort', onAbort, { once: true });
    void this.#terminal.then(() => signal.removeEventListener('abort', onAbort));
  }

  /** The current status: `CREATED | QUEUED | RUNNING | COMPLETED | FAILED | CANCELLED`. */
  get status(): RunStatus {
    return this.#status;
  }

  /** Whether the run was started (by `start()` or `stream()`). */
  get started(): boolean {
    return this.#startCalled;
  }

  /**
   * Whether the agent was ever invoked: false for a run that ended before RUNNING (cancelled
   * while CREATED or QUEUED, or timed out in the queue).
   */
  get agentStarted(): boolean {
    return this.#actor.getSnapshot().context.executor !== 'idle';
  }

  /** The state the agent passed to its latest `ctx.safePoint(kind, state)`. */
  get safePointState(): unknown {
    return this.#safePointState;
  }

  /**
   * Starts the run: it enters its session's queue in start order (nested runs start at once).
   *
   * @throws {@link RunAlreadyStartedError} (`RUN_ALREADY_STARTED`) on a second call
   * @throws {@link SessionBusyError} (`SESSION_BUSY`) when the strategy is `reject` and the
   *   session has work; the run is then CANCELLED
   */
  start(): void {
    if (this.#startCalled) throw new RunAlreadyStartedError(this.id);
    this.#startCalled = true;
    if (this.#status !== 'CREATED') return; // cancelled before start: nothing to run
    this.#core.startRun(this);
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
   * Cancels the run, immediately or at a safe point (DESIGN.md §5).
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
    } = parseOptions(cancelOptionsSchema, options, 'options');
    const request: CancelRequest = {
      mode,
      deadlineAt:
        mode !== CancelMode.Immediate && timeoutMs !== undefined
          ? this.#core.clock.now() + timeoutMs
          : undefined,
      recursive: recursive ?? mode === CancelMode.Immediate,
      cause: 'cancel',
      reason,
    };
    return this.cancelWith(request);
  }

  /** @internal Cancels with a fully formed request (used for propagation and by the runtime). */
  cancelWith(request: CancelRequest): CancelResult {
    const before = this.#actor.getSnapshot().context.cancelSeq;
    const statusBefore = this.#status;
    // On a terminal run a cancel is a no-op, reported as `ended` even if the run had been
    // cancelled before (DESIGN.md §5): this request cancelled nothing.
    if (terminalRunStatuses.has(statusBefore)) {
      return { contributed: false, outcome: Promise.resolve('ended') };
    }
    this.#send({ type: 'run.cancel', request });
    const contributed = this.#actor.getSnapshot().context.cancelSeq !== before;
    return { contributed, outcome: this.#cancelOutcome() };
  }

  /**
   * Asks the agent to finish early (cooperative). On a CREATED or QUEUED run it is a cancel.
   *
   * @param message - handed to the agent as `ctx.interruptMessage`
   * @returns whether this call contributed (false on a terminal run, or a repeated interrupt)
   */
  interrupt(message?: string): boolean {
    return this.interruptWith(message, 'interrupt');
  }

  /** @internal Interrupts with a cause (`shutdown` from the runtime); see {@link AgentRun.interrupt}. */
  interruptWith(message: string | undefined, cause: InterruptCause): boolean {
    const statusBefore = this.#status;
    if (terminalRunStatuses.has(statusBefore)) return false;
    const before = this.#actor.getSnapshot().context;
    // Set before the send: the interrupt signal's listeners run inside it.
    if (statusBefore === 'RUNNING' && !before.interruptRequested) this.#interruptCause = cause;
    this.#send({ type: 'run.interrupt', message });
    const after = this.#actor.getSnapshot().context;
    return (
      after.interruptRequested !== before.interruptRequested || after.cancelSeq !== before.cancelSeq
    );
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
    const key = { ownerId: this.ownerId, sessionId: this.sessionId };
    // Nothing of this run lies at or before the log's end when it was prepared: skip the
    // session's history instead of filtering it event by event.
    let after = Math.max(options.after ?? 0, this.#logFloor);
    try {
      for await (const event of this.#core.eventLog.follow({ signal: stop.signal }, key, {
        after,
        runId: this.id,
      })) {
        after = event.seq;
        yield event;
      }
      if (callerStopped()) return;
      // Terminated: drain what was appended up to settlement.
      for (const event of await this.#core.eventLog.read({}, key, { after, runId: this.id })) {
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
      if (!terminalRunStatuses.has(this.#status)) this.cancel({ reason: 'stream closed' });
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

  // ---- internal, used by the runtime and the session ------------------------------------------

  /** @internal Moves CREATED → QUEUED (unless something admitted or cancelled it already). */
  enqueue(): void {
    if (this.#status === 'CREATED') this.#send({ type: 'run.start', at: this.#core.clock.now() });
  }

  /**
   * @internal Moves QUEUED → RUNNING, or CREATED → QUEUED → RUNNING in one step when the
   * session admits the run as it starts.
   * @returns whether the run was admitted (its agent started), even if something cancelled it
   *   in the same step: the session must then wait for it to settle
   */
  admit(): boolean {
    if (this.#status === 'CREATED') {
      this.#send({ type: 'run.start', at: this.#core.clock.now(), admitted: true });
    } else {
      this.#send({ type: 'run.admit' });
    }
    return this.#actor.getSnapshot().context.executor !== 'idle';
  }

  /** @internal Whether the run was prepared with `timeoutMs: 0` (spent before it could queue). */
  get hasNoBudget(): boolean {
    return this.#actor.getSnapshot().context.timeoutMs === 0;
  }

  /** @internal The live nested runs. */
  get children(): ReadonlySet<AgentRun<unknown>> {
    return this.#children ?? noChildren;
  }

  /** @internal Runs the agent; wired as the run machine's `startExecutor` action. */
  execute(): void {
    const ctx = createRunContext(this);
    // A microtask hop: the agent never runs inside an XState transition.
    Promise.resolve()
      .then(() => this.#agent.execute(this.#input, ctx))
      .then(
        (output) => this.#send({ type: 'agent.done', output }),
        (error: unknown) => this.#send({ type: 'agent.error', error }),
      );
  }

  /** @internal Fires the run's AbortSignal; wired as the run machine's `abortExecutor` action. */
  abortExecutor(cause: CancelCause, reason: string | undefined): void {
    this.#abort.abort(createAbortReason(this.id, cause, reason));
  }

  // ---- RunContextHost: what the agent's ctx reaches (src/run/run-context.ts) -----------------

  /** @internal */
  get clock(): Clock {
    return this.#core.clock;
  }

  /** @internal */
  get interruptRequested(): boolean {
    return this.#actor.getSnapshot().context.interruptRequested;
  }

  /** @internal */
  get interruptMessage(): string | undefined {
    return this.#actor.getSnapshot().context.interruptMessage;
  }

  /** @internal */
  get interruptCause(): InterruptCause | undefined {
    return this.#interruptCause;
  }

  /** @internal */
  executorSignal(): AbortSignal {
    return this.#abort.signal;
  }

  /** @internal */
  interruptSignal(): AbortSignal {
    return this.#interruptController().signal;
  }

  /** @internal Inbox, history and approvals (src/agent/agent-services.ts). */
  agentServices(): AgentServices {
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- the bound getters close over the run
    const run = this;
    return (this.#services ??= this.#core.agentServices(this, {
      get signal() {
        return run.executorSignal();
      },
      emit: (type, payload) => this.emitFromAgent(type, payload),
      isLive: () => this.#isLive(),
      isAbandoned: () => this.#finished,
    }));
  }

  /** @internal Fenced: a late executor cannot write into the log. */
  emitFromAgent(type: string, payload: Record<string, unknown>): void {
    if (this.#isLive()) this.#core.appendEvent(this, type, payload);
  }

  /** @internal */
  reachSafePoint(kind: SafePointKind, state: unknown): void {
    if (state !== undefined) this.#safePointState = state;
    // Only a pending safe-point cancel (RUNNING.cancelling) reacts to a safe point: with none
    // pending the event would be a no-op macrostep, and agents reach safe points often.
    if (this.#status === 'RUNNING' && this.#actor.getSnapshot().context.cancel !== undefined) {
      this.#send({ type: 'run.safe_point', kind });
    }
    if (this.#status === 'CANCELLED') {
      const { cause, cancel } = this.#actor.getSnapshot().context;
      throw new RunCancelledError(this.id, cause ?? 'cancel', cancel?.reason);
    }
  }

  /** @internal */
  spawnNested<TIn, TOut>(
    agent: Agent<TIn, TOut>,
    input: TIn,
    options: SpawnOptions | undefined,
  ): AgentRun<TOut> {
    parseOptions(spawnOptionsSchema, options ?? {}, 'options');
    if (!this.#isLive()) {
      const { cause } = this.#actor.getSnapshot().context;
      if (this.#status === 'CANCELLED') throw new RunCancelledError(this.id, cause ?? 'cancel');
      throw new InvalidArgumentError(
        'spawn',
        `run ${this.id} is ${this.#status}: a run that ended cannot start nested runs`,
      );
    }
    const child = this.#core.spawnNested(this, agent, input, options);
    const children = (this.#children ??= new Set());
    children.add(child);
    void child.termination.then(() => children.delete(child));
    return child;
  }

  #isLive(): boolean {
    return !terminalRunStatuses.has(this.#status);
  }

  /** Sends to the run actor; once the run has finished, its actor is stopped and this is a no-op. */
  #send(event: RunMachineEvent): void {
    if (this.#finished) return;
    this.#actor.send(event);
  }

  #request(cause: CancelCause, mode: CancelModeValue, reason?: string): CancelRequest {
    return { mode, deadlineAt: undefined, recursive: true, cause, reason };
  }

  #cancelOutcome(): Promise<CancelOutcome> {
    return this.#terminal.then((status) => {
      if (status !== 'CANCELLED') return 'ended';
      return this.#actor.getSnapshot().context.escalated ? 'escalated' : 'cancelled';
    });
  }

  /** The interrupt controller, created on first use (already aborted if the run was interrupted). */
  #interruptController(): AbortController {
    if (this.#interrupt === undefined) {
      this.#interrupt = new AbortController();
      const { interruptRequested, interruptMessage } = this.#actor.getSnapshot().context;
      if (interruptRequested) {
        this.#interrupt.abort(
          new DOMException(interruptMessage ?? 'run interrupted', 'AbortError'),
        );
      }
    }
    return this.#interrupt;
  }

  #onSnapshot(snapshot: RunSnapshot): void {
    const interrupt = this.#interrupt;
    if (
      interrupt !== undefined &&
      snapshot.context.interruptRequested &&
      !interrupt.signal.aborted
    ) {
      interrupt.abort(
        new DOMException(snapshot.context.interruptMessage ?? 'run interrupted', 'AbortError'),
      );
    }
    const status = statusOf(snapshot);
    if (status !== this.#status) {
      // A run admitted as it starts passes QUEUED within one step: report it all the same.
      if (this.#status === 'CREATED' && status === 'RUNNING')
        this.#changeStatus('QUEUED', snapshot);
      this.#changeStatus(status, snapshot);
      if (terminalRunStatuses.has(status)) this.#onTerminal(status);
    }
    if (!this.#finished && terminalRunStatuses.has(status) && isSettled(snapshot)) {
      this.#finish(snapshot);
    }
  }

  #changeStatus(to: RunStatus, snapshot: RunSnapshot): void {
    const from = this.#status;
    this.#status = to;
    try {
      this.#core.onStatusChange(this, from, to, snapshot.context);
    } catch (error) {
      this.#core.reportError(error); // bookkeeping failed; the lifecycle must go on
    }
  }

  #onTerminal(status: RunStatus): void {
    this.#resolveTerminal(status);
    for (const child of this.#children ?? noChildren) {
      child.cancelWith(this.#request('cancel', CancelMode.Immediate, 'parent run ended'));
    }
  }

  #finish(snapshot: RunSnapshot): void {
    this.#finished = true;
    const { context } = snapshot;
    let outcome: RunOutcome<TOutput>;
    if (snapshot.matches('COMPLETED')) {
      outcome = {
        status: 'COMPLETED',
        output: context.output as TOutput,
        interrupted: context.interruptRequested,
      };
    } else if (snapshot.matches('FAILED')) {
      outcome = { status: 'FAILED', error: context.error };
    } else {
      outcome = {
        status: 'CANCELLED',
        cause: context.cause ?? 'cancel',
        reason: context.cancel?.reason,
        escalated: context.escalated,
        unsettled: context.unsettled,
      };
    }
    try {
      this.#core.onSettled(this, outcome);
    } catch (error) {
      this.#core.reportError(error);
    }
    this.#actor.stop();
    this.#resolveTermination(outcome);
  }

  #onActorError(error: unknown): void {
    // A bug inside the machine must not kill the process or strand the session.
    this.#core.reportError(error);
    if (this.#finished) return;
    const from = this.#status;
    this.#status = 'FAILED';
    this.#core.onStatusChange(this, from, 'FAILED', {
      ...this.#actor.getSnapshot().context,
      error,
    });
    this.#abort.abort(error);
    this.#resolveTerminal('FAILED');
    this.#finished = true;
    const outcome: RunOutcome<TOutput> = { status: 'FAILED', error };
    this.#core.onSettled(this, outcome);
    this.#resolveTermination(outcome);
  }
}
