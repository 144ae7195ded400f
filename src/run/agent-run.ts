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
import { InvalidArgumentError, RunAlreadyStartedError, RunCancelledError } from '../errors.js';
import { durationMs, parseOptions } from '../validation.js';
import { setInspectedParent } from '../inspect/actor-parents.js';
import type { RunplaneEvent } from '../events/event-log.js';
import type { RuntimeCore, BoundRunMachine } from '../runtime/runtime-core.js';
import type { Agent, RunContext, SpawnOptions } from './agent.js';
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

const safePointKinds: ReadonlySet<string> = new Set(['afterChatModel', 'afterToolCalls']);

/** Event namespaces only the runtime writes: an agent cannot forge lifecycle events. */
const reservedEventPrefixes = ['run.', 'session.'];

const noChildren: ReadonlySet<AgentRun<unknown>> = new Set();

const statusOf = (snapshot: RunSnapshot): RunStatus =>
  (typeof snapshot.value === 'string'
    ? snapshot.value
    : Object.keys(snapshot.value)[0]) as RunStatus;

const isSettled = (snapshot: RunSnapshot): boolean =>
  snapshot.matches('COMPLETED') ||
  snapshot.matches('FAILED') ||
  snapshot.matches({ CANCELLED: 'settled' }) ||
  snapshot.matches({ CANCELLED: 'abandoned' });

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
   * `unwindTimeoutMs`). Never rejects.
   */
  readonly termination: Promise<RunOutcome<TOutput>>;

  readonly #core: RuntimeCore;
  readonly #agent: Agent<unknown, TOutput>;
  readonly #input: unknown;
  readonly #actor: Actor<BoundRunMachine>;
  readonly #abort = new AbortController();
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
    const statusBefore = this.#status;
    if (terminalRunStatuses.has(statusBefore)) return false;
    const before = this.#actor.getSnapshot().context;
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
    const forward = () => stop.abort();
    const callerStopped = () => options.signal?.aborted === true;
    if (callerStopped()) return;
    options.signal?.addEventListener('abort', forward, { once: true });
    void this.termination.then(() => stop.abort());
    const key = { ownerId: this.ownerId, sessionId: this.sessionId };
    let after = options.after ?? 0;
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

  /** @internal Moves CREATED → QUEUED. */
  enqueue(): void {
    this.#send({ type: 'run.start', at: this.#core.clock.now() });
  }

  /**
   * @internal Moves QUEUED → RUNNING.
   * @returns whether the run was admitted (its agent started), even if something cancelled it
   *   in the same step: the session must then wait for it to settle
   */
  admit(): boolean {
    this.#send({ type: 'run.admit' });
    return this.#actor.getSnapshot().context.executor !== 'idle';
  }

  /** @internal The live nested runs. */
  get children(): ReadonlySet<AgentRun<unknown>> {
    return this.#children ?? noChildren;
  }

  /** @internal Runs the agent; wired as the run machine's `startExecutor` action. */
  execute(): void {
    const ctx = this.#createContext();
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
    this.#abort.abort(new RunCancelledError(this.id, cause, reason));
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

  #createContext(): RunContext {
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- the context closes over its run
    const run = this;
    const isLive = () => !terminalRunStatuses.has(run.#status);
    // Agent layer: inbox, history, approvals (src/agent/agent-services.ts).
    const services = run.#core.agentServices(run, {
      signal: run.#abort.signal,
      emit: (type, payload) => {
        if (isLive()) run.#core.appendEvent(run, type, payload);
      },
      isLive,
      isAbandoned: () => run.#finished,
    });
    return {
      runId: run.id,
      ownerId: run.ownerId,
      sessionId: run.sessionId,
      parentRunId: run.parentRunId,
      signal: run.#abort.signal,
      get interruptSignal() {
        return run.#interruptController().signal;
      },
      clock: run.#core.clock,
      inbox: services.inbox,
      history: services.history,
      requestApproval: services.requestApproval,
      get interruptRequested() {
        return run.#actor.getSnapshot().context.interruptRequested;
      },
      get interruptMessage() {
        return run.#actor.getSnapshot().context.interruptMessage;
      },
      emit(type, payload) {
        if (
          typeof type !== 'string' ||
          type === '' ||
          reservedEventPrefixes.some((prefix) => type.startsWith(prefix))
        ) {
          throw new InvalidArgumentError(
            'type',
            `expected \`type\` to be a non-empty event type outside run.* and session.*, got ${JSON.stringify(type)}`,
          );
        }
        if (!isLive()) return; // fenced: a late executor cannot write into the log
        run.#core.appendEvent(run, type, payload ?? {});
      },
      safePoint(kind: SafePointKind, state?: unknown) {
        if (!safePointKinds.has(kind)) {
          throw new InvalidArgumentError(
            'kind',
            `expected \`kind\` to be 'afterChatModel' or 'afterToolCalls', got ${JSON.stringify(kind)}`,
          );
        }
        if (state !== undefined) run.#safePointState = state;
        if (isLive()) run.#send({ type: 'run.safe_point', kind });
        if (run.#status === 'CANCELLED') {
          const { cause, cancel } = run.#actor.getSnapshot().context;
          throw new RunCancelledError(run.id, cause ?? 'cancel', cancel?.reason);
        }
      },
      spawn<TIn, TOut>(agent: Agent<TIn, TOut>, input: TIn, options?: SpawnOptions) {
        parseOptions(spawnOptionsSchema, options ?? {}, 'options');
        if (!isLive()) {
          const { cause } = run.#actor.getSnapshot().context;
          if (run.#status === 'CANCELLED') throw new RunCancelledError(run.id, cause ?? 'cancel');
          throw new InvalidArgumentError(
            'spawn',
            `run ${run.id} is ${run.#status}: a run that ended cannot start nested runs`,
          );
        }
        const child = run.#core.spawnNested(run, agent, input, options);
        const children = (run.#children ??= new Set());
        children.add(child);
        void child.termination.then(() => children.delete(child));
        return child;
      },
    };
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
      const from = this.#status;
      this.#status = status;
      try {
        this.#core.onStatusChange(this, from, status, snapshot.context);
      } catch (error) {
        this.#core.reportError(error); // bookkeeping failed; the lifecycle must go on
      }
      if (terminalRunStatuses.has(status)) this.#onTerminal(status);
    }
    if (!this.#finished && terminalRunStatuses.has(status) && isSettled(snapshot)) {
      this.#finish(snapshot);
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
