/**
 * The executor side of a run (internal, never exported from the package): the agent and its
 * input, the AbortSignal and interrupt signal, the agent services, and the commands the
 * runtime sends to the run's actor. One per run, kept in the runtime's table keyed by run id
 * (an agent is a function: it travels in no event and no context). See docs/architecture.md,
 * "A run's life".
 *
 * @module
 */
import type { AnyActorRef, SnapshotFrom } from 'xstate';
import {
  CancelMode,
  type CancelCause,
  type CancelRequest,
  type SafePointKind,
} from '../../machines/cancel-request.js';
import type { SessionStrategy } from '../../machines/session.machine.js';
import type {
  InterruptCause,
  RunMachineContext,
  RunMachineEvent,
  RunMachineOutput,
  RunStatus,
} from '../../machines/run.types.js';
import { terminalRunStatuses } from '../../machines/run.types.js';
import type { runMachine } from '../../machines/run.machine.js';
import type { AgentServices } from '../agent/agent-services.js';
import type { RunTelemetry } from '../observability/run-telemetry.js';
import type { Clock } from '../clock.js';
import {
  createAbortReason,
  InvalidArgumentError,
  RunCancelledError,
  RunSuspendedError,
} from '../errors.js';
import type { EventLog, SessionKey } from '../events/event-log.js';
import { LazyAbortController } from '../lazy-abort-controller.js';
import type { Agent, SpawnOptions } from './agent.js';
import type { AgentRun } from './agent-run.js';
import { createRunContext, type RunContextHost } from './run-context.js';
import type { CancelOutcome, CancelResult, RunOutcome } from './run-outcome.js';

type RunSnapshot = SnapshotFrom<typeof runMachine>;

/** @internal What an executor needs from its runtime. */
export interface RunHost {
  readonly clock: Clock;
  readonly eventLog: EventLog;
  /** Logs one event of `run` in its session's event log (never throws). */
  appendEvent(run: RunExecutor, type: string, payload: Record<string, unknown>): void;
  /** The inbox, history and approvals bound to `run`. */
  agentServices(run: RunExecutor): AgentServices;
  /**
   * Sends `session.start` for `run` to its session actor.
   *
   * @returns the session's active run id afterwards (for a `SessionBusyError`)
   */
  startInSession(run: RunExecutor): string | undefined;
  /** Creates, registers and starts a nested run of `parent`. */
  spawnNested<TOutput>(
    parent: RunExecutor,
    agent: Agent<unknown, TOutput>,
    input: unknown,
    options: SpawnOptions | undefined,
  ): AgentRun<TOutput>;
  /** The run settled: forget it. */
  onSettled(run: RunExecutor): void;
  /** Spans and metrics (src/observability/run-telemetry.ts). */
  readonly telemetry: RunTelemetry;
  reportError(error: unknown): void;
}

/** @internal Construction parameters of a {@link RunExecutor}. */
export interface RunExecutorInit {
  readonly host: RunHost;
  readonly runId: string;
  readonly ownerId: string;
  readonly sessionId: string;
  readonly parentRunId: string | undefined;
  readonly agent: Agent<unknown, unknown>;
  readonly input: unknown;
  readonly strategy: SessionStrategy;
  readonly graceMs: number;
  /**
   * `{ ownerId, sessionId }`, frozen, shared by every run of the session: the in-memory log builds
   * the key's string once for a run of appends under one key object.
   */
  readonly sessionKey: SessionKey;
  /** The session log's last seq when the run was prepared: none of its events lie at or before it. */
  readonly logFloor: number;
  /** A TurnLoop turn's consumed item ids, logged on `session.run_started` (`item_ids`). */
  readonly itemIds?: readonly string[] | undefined;
}

/** A cancel mode by its README name (`user.interrupt`'s `mode`), for span attributes. */
const cancelModeNames: Readonly<Record<number, string>> = {
  [CancelMode.Immediate]: 'immediate',
  [CancelMode.AfterChatModel]: 'after_chat_model',
  [CancelMode.AfterToolCalls]: 'after_tool_calls',
  [CancelMode.AnySafePoint]: 'any_safe_point',
};

/** @internal One run's executor and command side (see the module note). */
export class RunExecutor implements RunContextHost {
  readonly id: string;
  readonly ownerId: string;
  readonly sessionId: string;
  readonly parentRunId: string | undefined;
  /** `{ ownerId, sessionId }`, frozen, shared by the session's runs (see {@link RunExecutorInit}). */
  readonly sessionKey: SessionKey;
  readonly strategy: SessionStrategy;
  readonly graceMs: number;
  readonly logFloor: number;
  /** A TurnLoop turn's consumed item ids, logged on `session.run_started` (`item_ids`). */
  readonly itemIds: readonly string[] | undefined;
  readonly host: RunHost;
  /** Resolves once the run's actor reached its final state (or failed). */
  readonly termination: Promise<RunOutcome<unknown>>;
  /** Whether `start()` was called (a nested run is started by its spawn). */
  started = false;
  /** The public handle (set by the runtime right after construction). */
  handle: AgentRun<unknown> | undefined;
  /** The state the agent passed to its latest `ctx.safePoint(kind, state)`. */
  safePointState: unknown;
  /** What the agent asked for with `ctx.suspend(request)`, once it did. */
  suspension: { readonly request: unknown } | undefined;

  readonly #agent: Agent<unknown, unknown>;
  readonly #input: unknown;
  /** The run's actor, a child of its session (or parent run); set once it exists. */
  #actor: AnyActorRef | undefined;
  /** Fires the run's AbortSignal, created on first use (a no-op agent never needs one). */
  readonly #abort = new LazyAbortController();
  /** Aborted when an interrupt reaches the RUNNING run; created on first use. */
  #interrupt: AbortController | undefined;
  #services: AgentServices | undefined;
  /** The first terminal status, once the run has one. */
  #terminalStatus: RunStatus | undefined;
  /** {@link RunExecutor.terminal}, made on first use: most runs are never awaited that way. */
  #terminal: Promise<RunStatus> | undefined;
  #resolveTerminal: ((status: RunStatus) => void) | undefined;
  #resolveTermination!: (outcome: RunOutcome<unknown>) => void;
  /** Set when the actor settled or failed: the executor is fenced off from then on. */
  #outcome: RunOutcome<unknown> | undefined;

  constructor(init: RunExecutorInit) {
    this.host = init.host;
    this.id = init.runId;
    this.ownerId = init.ownerId;
    this.sessionId = init.sessionId;
    this.sessionKey = init.sessionKey;
    this.parentRunId = init.parentRunId;
    this.strategy = init.strategy;
    this.graceMs = init.graceMs;
    this.logFloor = init.logFloor;
    this.itemIds = init.itemIds;
    this.#agent = init.agent;
    this.#input = init.input;
    this.termination = new Promise((resolve) => (this.#resolveTermination = resolve));
  }

  /**
   * Resolves once the status is terminal, with that status (the first one: a run's actor that
   * fails after it turned terminal keeps it).
   */
  get terminal(): Promise<RunStatus> {
    if (this.#terminal === undefined) {
      const status = this.#terminalStatus;
      this.#terminal =
        status === undefined
          ? new Promise((resolve) => (this.#resolveTerminal = resolve))
          : Promise.resolve(status);
    }
    return this.#terminal;
  }

  /** Binds the run's actor (once: the session's child after prepare, or `self` in an action). */
  attach(actor: AnyActorRef): void {
    this.#actor ??= actor;
  }

  /** Whether the run's actor exists (a refused spawn never made one). */
  get attached(): boolean {
    return this.#actor !== undefined;
  }

  #snapshot(): RunSnapshot | undefined {
    return this.#actor?.getSnapshot() as RunSnapshot | undefined;
  }

  #context(): RunMachineContext | undefined {
    return this.#snapshot()?.context;
  }

  /** The status a user sees (`FAILED` once the actor itself failed). */
  get status(): RunStatus {
    const snapshot = this.#snapshot();
    if (snapshot === undefined) return 'CREATED';
    return snapshot.status === 'error' ? 'FAILED' : snapshot.context.status;
  }

  /** Whether the agent was ever invoked. */
  get agentStarted(): boolean {
    const executor = this.#context()?.executor;
    return executor !== undefined && executor !== 'idle';
  }

  /** The session refused the run at its start (`reject` strategy while busy). */
  get rejected(): boolean {
    return this.#context()?.verdict === 'rejected';
  }

  /** Sends to the run's actor; a no-op once it settled (its actor is stopped). */
  send(event: RunMachineEvent): void {
    if (this.#outcome !== undefined) return;
    this.#actor?.send(event);
  }

  /** Cancels with a fully formed request. */
  cancelWith(request: CancelRequest): CancelResult {
    // On a terminal run a cancel is a no-op, reported as `ended` even if the run had been
    // cancelled before: this request cancelled nothing.
    if (terminalRunStatuses.has(this.status)) {
      return { contributed: false, outcome: Promise.resolve('ended') };
    }
    const before = this.#context()?.cancel;
    this.send({ type: 'run.cancel', request });
    const contributed = this.#context()?.cancel !== before;
    if (contributed) {
      this.host.telemetry.noted(this, 'cancel_requested', {
        'runplane.cancel.mode': cancelModeNames[request.mode] ?? String(request.mode),
        'runplane.cancel.cause': request.cause,
        ...(request.reason ? { 'runplane.cancel.reason': request.reason } : {}),
        'runplane.cancel.recursive': request.recursive,
      });
    }
    return { contributed, outcome: this.#cancelOutcome() };
  }

  /** Interrupts with a cause; on a CREATED or QUEUED run it is a cancel. */
  interruptWith(message: string | undefined, cause: InterruptCause): boolean {
    if (terminalRunStatuses.has(this.status)) return false;
    const before = this.#context();
    this.send({
      type: 'run.interrupt',
      message,
      cause,
      initiator: cause === 'shutdown' ? 'shutdown' : 'user',
    });
    const after = this.#context();
    const changed =
      after?.interruptRequested !== before?.interruptRequested || after?.cancel !== before?.cancel;
    if (changed) {
      this.host.telemetry.noted(
        this,
        after?.cancel !== before?.cancel ? 'cancel_requested' : 'interrupt_requested',
        { 'runplane.interrupt.cause': cause },
      );
    }
    return changed;
  }

  /** Cancels at once with cause `signal` (an external AbortSignal fired). */
  cancelBySignal(reason: unknown): void {
    const text =
      reason instanceof Error ? reason.message : typeof reason === 'string' ? reason : undefined;
    this.host.telemetry.noted(this, 'cancel_requested', { 'runplane.cancel.cause': 'signal' });
    this.send({
      type: 'run.cancel',
      request: {
        mode: CancelMode.Immediate,
        deadlineAt: undefined,
        recursive: true,
        cause: 'signal',
        reason: text ?? 'external signal aborted',
        // The caller's own AbortSignal, passed at prepare time.
        initiator: 'user',
      },
    });
  }

  #cancelOutcome(): Promise<CancelOutcome> {
    return this.terminal.then((status) => {
      if (status !== 'CANCELLED') return 'ended';
      return this.#context()?.escalated === true ? 'escalated' : 'cancelled';
    });
  }

  // ---- wired as the run machine's actions (src/runtime/create-runtime.ts) ------------------

  /**
   * `startExecutor`: runs the agent, one microtask later (never inside a transition), and sends
   * `agent.done` / `agent.error` when its promise settles (a synchronous throw is an
   * `agent.error` too).
   *
   * @remarks Two promises of our own and one `then` on the agent's promise: every promise and
   * microtask job costs more once any AsyncLocalStorage in the process has turned Node's
   * promise hooks on (README "Performance").
   */
  execute(): void {
    const ctx = createRunContext(this);
    // Not `queueMicrotask`: Node 20 builds an AsyncResource for every call, on top of the job.
    void Promise.resolve().then(() => {
      let result: unknown;
      try {
        result = this.host.telemetry.inRunContext(this.id, () =>
          this.#agent.execute(this.#input, ctx),
        );
      } catch (error) {
        this.send({ type: 'agent.error', error });
        return;
      }
      // Not returned: the chain would adopt the agent's promise, one more promise and two jobs.
      Promise.resolve(result).then(
        (output) => this.send({ type: 'agent.done', output }),
        (error: unknown) => this.send({ type: 'agent.error', error }),
      );
    });
  }

  /**
   * `abortExecutor`: fires the run's AbortSignal once the step that decided it is over. Its
   * listeners are the agent's code: one that prepares, starts or spawns a run must find every
   * actor idle, not in the middle of the step that cancelled it (which would queue that call
   * behind the step and refuse it).
   */
  abortExecutor(cause: CancelCause, reason: string | undefined): void {
    const abortReason = createAbortReason(this.id, cause, reason);
    queueMicrotask(() => this.#abort.abort(abortReason));
  }

  /**
   * `signalInterrupt`: fires the interrupt signal, if anyone listens, once the step that
   * recorded the interrupt is over (so a listener reads `ctx.interruptCause` as it now is).
   */
  signalInterrupt(message: string | undefined): void {
    const interrupt = this.#interrupt;
    if (interrupt === undefined) return;
    queueMicrotask(() =>
      interrupt.abort(new DOMException(message ?? 'run interrupted', 'AbortError')),
    );
  }

  /** `logStatus` saw a terminal status. */
  onTerminal(status: RunStatus): void {
    if (this.#terminalStatus !== undefined) return;
    this.#terminalStatus = status;
    this.#resolveTerminal?.(status);
  }

  /** `reportSettled`: the actor reached its final state with `output`. */
  settle(output: RunMachineOutput): void {
    this.#finish(output);
  }

  /** The actor itself failed (a bug in an action): the run is FAILED and its agent aborted. */
  fail(error: unknown): void {
    if (this.#outcome !== undefined) return;
    // After the step, as in `abortExecutor`.
    queueMicrotask(() => this.#abort.abort(error));
    this.onTerminal('FAILED');
    this.#finish({ status: 'FAILED', error });
  }

  #finish(outcome: RunOutcome<unknown>): void {
    if (this.#outcome !== undefined) return;
    this.#outcome = outcome;
    this.#resolveTermination(outcome);
    try {
      this.host.onSettled(this);
    } catch (error) {
      this.host.reportError(error);
    }
  }

  // ---- RunContextHost: what the agent's ctx reaches (src/run/run-context.ts) ---------------

  get clock(): Clock {
    return this.host.clock;
  }

  get interruptRequested(): boolean {
    return this.#context()?.interruptRequested === true;
  }

  get interruptMessage(): string | undefined {
    return this.#context()?.interrupt?.message;
  }

  get interruptCause(): InterruptCause | undefined {
    return this.#context()?.interrupt?.cause;
  }

  executorSignal(): AbortSignal {
    return this.#abort.signal;
  }

  interruptSignal(): AbortSignal {
    if (this.#interrupt === undefined) {
      this.#interrupt = new AbortController();
      const context = this.#context();
      if (context?.interruptRequested === true) {
        this.#interrupt.abort(
          new DOMException(context.interrupt?.message ?? 'run interrupted', 'AbortError'),
        );
      }
    }
    return this.#interrupt.signal;
  }

  agentServices(): AgentServices {
    return (this.#services ??= this.host.agentServices(this));
  }

  /** Whether the run is not yet terminal. */
  isLive(): boolean {
    return !terminalRunStatuses.has(this.status);
  }

  /** Whether the run settled or was abandoned: a late executor writes nothing from then on. */
  isAbandoned(): boolean {
    return this.#outcome !== undefined || this.#context()?.executor === 'abandoned';
  }

  /** Fenced: a late executor cannot write into the log. */
  emitFromAgent(type: string, payload: Record<string, unknown>): void {
    if (this.isLive()) this.host.appendEvent(this, type, payload);
  }

  reachSafePoint(kind: SafePointKind, state: unknown): void {
    if (state !== undefined) this.safePointState = state;
    this.host.telemetry.noted(this, 'safe_point', { 'runplane.safe_point.kind': kind });
    const context = this.#context();
    // Only a pending safe-point cancel (state `cancelling`) reacts to a safe point: with none
    // pending the event would be a no-op macrostep, and agents reach safe points often.
    if (context?.status === 'RUNNING' && context.cancel !== undefined) {
      this.send({ type: 'run.safe_point', kind });
    }
    const after = this.#context();
    if (after?.status === 'CANCELLED') {
      throw new RunCancelledError(this.id, after.cause ?? 'cancel', after.cancel?.reason);
    }
  }

  suspendRun(request: unknown, state: unknown): never {
    const context = this.#context();
    if (context?.status === 'CANCELLED') {
      throw new RunCancelledError(this.id, context.cause ?? 'cancel', context.cancel?.reason);
    }
    // The first suspension of a live run counts; the agent is expected to throw it out.
    if (this.suspension === undefined && this.isLive()) {
      this.suspension = { request };
      if (state !== undefined) this.safePointState = state;
    }
    throw new RunSuspendedError(this.id, request);
  }

  spawnNested<TIn, TOut>(
    agent: Agent<TIn, TOut>,
    input: TIn,
    options: SpawnOptions | undefined,
  ): AgentRun<TOut> {
    if (!this.isLive()) {
      const context = this.#context();
      if (context?.status === 'CANCELLED') {
        throw new RunCancelledError(this.id, context.cause ?? 'cancel');
      }
      throw new InvalidArgumentError(
        'spawn',
        `run ${this.id} is ${this.status}: a run that ended cannot start nested runs`,
      );
    }
    return this.host.spawnNested(this, agent, input, options);
  }
}
