/**
 * createRuntime: the entry point. Holds the live runs, the session actors and the event log,
 * and binds the pure machines to them.
 *
 * @module
 */
import { createActor, type InspectionEvent, type Observer } from 'xstate';
import { fromClockTimer } from '../../machines/clock-timer.js';
import { CancelMode, type CancelRequest } from '../../machines/cancel-request.js';
import { runMachine } from '../../machines/run.machine.js';
import { runtimeMachine } from '../../machines/runtime.machine.js';
import { sessionMachine, type SessionStrategy } from '../../machines/session.machine.js';
import { z } from 'zod';
import { createAgentServices } from '../agent/agent-services.js';
import { ApprovalBroker, type ApprovalDecision, type PendingApproval } from '../agent/approvals.js';
import { systemClock, unrefTimer, type Clock } from '../clock.js';
import {
  InvalidArgumentError,
  isCancellation,
  RunplaneError,
  SessionBusyError,
  ShuttingDownError,
} from '../errors.js';
import {
  toSessionKeyString,
  type EventLog,
  type RunplaneEvent,
  type SessionKey,
} from '../events/event-log.js';
import { createMemoryEventLog } from '../events/memory-event-log.js';
import { createRunId } from '../ids.js';
import type { Inbox, RuntimeInbox } from '../inbox/inbox.js';
import { createMemoryInbox } from '../inbox/memory-inbox.js';
import { createRuntimeInbox } from '../inbox/runtime-inbox.js';
import type { Agent, SpawnOptions } from '../run/agent.js';
import { AgentRun, type CancelOptions } from '../run/agent-run.js';
import type { RunOutcome } from '../run/run-outcome.js';
import { SessionHost, type Session } from '../session/session.js';
import { createMemorySessionStore } from '../stores/memory-session-store.js';
import type { SessionStore } from '../stores/session-store.js';
import { durationMs, nonEmptyString, parseOptions, withMethods } from '../validation.js';
import { RunSlots } from './run-slots.js';
import { guardInspect } from '../guard-inspect.js';
import type { RuntimeCore } from './runtime-core.js';

/** Options of {@link createRuntime}. Every field is optional. */
export interface RuntimeOptions {
  /** Time source for every timer and deadline. @default the system clock */
  readonly clock?: Clock;
  /** XState inspection observer handed to every run and session actor (e.g. `@statelyai/inspect`). */
  readonly inspect?: Observer<InspectionEvent> | ((event: InspectionEvent) => void);
  /**
   * Where events are logged, histories kept and hints queued.
   * `eventLog` @default an in-memory log; `sessionStore` (conversation histories) @default in
   * memory; `inbox` (hints) @default in memory.
   */
  readonly stores?: {
    readonly eventLog?: EventLog;
    readonly sessionStore?: SessionStore;
    readonly inbox?: Inbox;
  };
  /** How long a cancelled agent may ignore its signal before it is abandoned, in ms. @default 5000 */
  readonly unwindTimeoutMs?: number;
  /** How long an idle session actor is kept before it is stopped, in ms. @default 60000 */
  readonly sessionIdleTtlMs?: number;
  /** Cap on top-level runs RUNNING at once across all sessions; a positive integer. @default unlimited */
  readonly maxConcurrentRuns?: number;
  /** Receives errors that must not escape: a throwing event listener, an actor bug. @default console.error */
  readonly reportError?: (error: unknown) => void;
}

/** Options of {@link Runtime.prepare}. */
export interface PrepareOptions<TInput, TOutput> {
  /** The authenticated user; never taken from a request body. */
  readonly ownerId: string;
  /** The conversation; runs of one (ownerId, sessionId) run one at a time. */
  readonly sessionId: string;
  readonly agent: Agent<TInput, TOutput>;
  readonly input: TInput;
  /** Total budget from `start()` to a terminal status, queue time included, in ms. */
  readonly timeoutMs?: number;
  /** Aborting it cancels the run immediately (cause `signal`). */
  readonly signal?: AbortSignal;
  /** What to do when the session is busy. @default 'enqueue' */
  readonly strategy?: SessionStrategy;
  /** For `interrupt` / `preempt`: the active run's grace before it is cancelled, in ms. @default 5000 */
  readonly graceMs?: number;
  /** Use this run id instead of a fresh nanoid; must be unused. */
  readonly runId?: string;
}

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
   * Creates a run in status CREATED, already registered. Call `start()` (or `stream()`) to queue it.
   *
   * @throws {@link InvalidArgumentError} (`INVALID_ARGUMENT`) naming the bad field
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

const strategies = ['enqueue', 'reject', 'interrupt', 'preempt'] as const;

const runtimeOptionsSchema = z.strictObject({
  clock: withMethods<Clock>(
    ['now', 'setTimeout', 'clearTimeout'],
    'a clock with now(), setTimeout() and clearTimeout()',
  ).optional(),
  inspect: z
    .custom<RuntimeOptions['inspect']>(
      (value) =>
        typeof value === 'function' ||
        (typeof value === 'object' && value !== null && 'next' in value),
      { error: 'an inspection observer (a function or an object with next())' },
    )
    .optional(),
  stores: z
    .strictObject({
      eventLog: withMethods<EventLog>(
        ['append', 'read', 'follow', 'hasRun', 'lastSeq'],
        'an EventLog (append, read, follow, hasRun, lastSeq)',
      ).optional(),
      sessionStore: withMethods<SessionStore>(['load', 'append'], 'a SessionStore').optional(),
      inbox: withMethods<Inbox>(['push', 'drain'], 'an Inbox').optional(),
    })
    .optional(),
  unwindTimeoutMs: durationMs.optional(),
  sessionIdleTtlMs: durationMs.optional(),
  maxConcurrentRuns: z
    .number({ error: 'a positive integer' })
    .int({ error: 'a positive integer' })
    .positive({ error: 'a positive integer' })
    .optional(),
  reportError: z
    .custom<(error: unknown) => void>((value) => typeof value === 'function', {
      error: 'a function',
    })
    .optional(),
});

const prepareSchema = z.strictObject({
  input: z.unknown(),
  ownerId: nonEmptyString,
  sessionId: nonEmptyString,
  agent: z.custom<Agent>(
    (value) =>
      typeof value === 'object' && value !== null && typeof (value as Agent).execute === 'function',
    { error: 'an agent with an execute(input, ctx) method' },
  ),
  timeoutMs: durationMs.optional(),
  graceMs: durationMs.optional(),
  strategy: z.enum(strategies, { error: `one of ${strategies.join(', ')}` }).optional(),
  runId: nonEmptyString.optional(),
  signal: z
    .custom<AbortSignal>((value) => value instanceof AbortSignal, { error: 'an AbortSignal' })
    .optional(),
});

const sessionKeySchema = z.object({ ownerId: nonEmptyString, sessionId: nonEmptyString });
const shutdownSchema = z.strictObject({ graceMs: durationMs.optional() });

const keyOf = (ownerId: string, sessionId: string) => toSessionKeyString({ ownerId, sessionId });

const shutdownRequest = (reason: string): CancelRequest => ({
  mode: CancelMode.Immediate,
  deadlineAt: undefined,
  recursive: true,
  cause: 'shutdown',
  reason,
});

/**
 * Creates a runtime.
 *
 * @param options - {@link RuntimeOptions}
 * @throws {@link InvalidArgumentError} (`INVALID_ARGUMENT`) for an invalid option
 * @example
 * ```ts
 * const runtime = createRuntime();
 * const run = runtime.prepare({ ownerId: 'u1', sessionId: 's1', agent, input: 'hi' });
 * run.start();
 * console.log(await run.result());
 * ```
 */
export function createRuntime(options: RuntimeOptions = {}): Runtime {
  parseOptions(runtimeOptionsSchema, options, 'options');
  const clock = options.clock ?? systemClock;
  const eventLog = options.stores?.eventLog ?? createMemoryEventLog();
  const sessionStore = options.stores?.sessionStore ?? createMemorySessionStore();
  const inboxStore = options.stores?.inbox ?? createMemoryInbox();
  const approvals = new ApprovalBroker();
  const unwindTimeoutMs = options.unwindTimeoutMs ?? 5_000;
  const sessionIdleTtlMs = options.sessionIdleTtlMs ?? 60_000;
  const userReportError =
    options.reportError ?? ((error: unknown) => console.error('[runplane]', error));
  /** Never throws: a failing reporter falls back to the console. */
  const reportError = (error: unknown): void => {
    try {
      userReportError(error);
    } catch (reporterError) {
      console.error('[runplane] reportError threw', reporterError, 'while reporting', error);
    }
  };
  // A throwing inspector is reported; it must not fail a run or session actor mid-transition.
  const inspect = guardInspect(options.inspect, reportError);

  const liveRuns = new Map<string, AgentRun<unknown>>();
  const strategyOf = new Map<string, { strategy: SessionStrategy; graceMs: number }>();
  const sessions = new Map<string, SessionHost>();
  const listeners = new Set<(event: RunplaneEvent, key: SessionKey) => void>();
  const slots = new RunSlots(options.maxConcurrentRuns ?? Number.POSITIVE_INFINITY);

  const boundRunMachine = runMachine.provide({
    actors: { timer: fromClockTimer(clock) },
    guards: {
      isCancellationError: ({ event }) =>
        event.type === 'agent.error' && isCancellation(event.error),
    },
    actions: {
      startExecutor: (_, runId) => liveRuns.get(runId)?.execute(),
      abortExecutor: ({ context }, { cause, reason }) =>
        liveRuns.get(context.runId)?.abortExecutor(cause, reason),
      propagateCancel: ({ context }, request) => {
        if (request?.recursive !== true) return;
        const run = liveRuns.get(context.runId);
        for (const child of run?.children ?? []) child.cancelWith(request);
      },
    },
  });

  const hostFor = (key: SessionKey): SessionHost | undefined =>
    sessions.get(keyOf(key.ownerId, key.sessionId));

  const boundSessionMachine = sessionMachine.provide({
    guards: {
      slotFree: () => slots.hasFree(),
    },
    actions: {
      takeSlot: () => slots.take(),
      requestSlot: ({ context }) => {
        const host = hostFor(context);
        if (host !== undefined) slots.request(host);
      },
      withdrawSlotRequest: ({ context }) => {
        const host = hostFor(context);
        if (host !== undefined) slots.withdraw(host);
      },
      releaseSlot: () => slots.release(),
      admitRun: ({ context }, runId) => {
        const run = liveRuns.get(runId);
        // A run cancelled while its admission was in flight is settled already: free the slot.
        if (run === undefined || !run.admit()) {
          hostFor(context)?.actor.send({ type: 'session.run_settled', runId });
        }
      },
      interruptRun: (_, runId) => {
        liveRuns.get(runId)?.interrupt('interrupted by a newer run');
      },
      cancelRuns: (_, params) => {
        for (const runId of params.runIds) {
          liveRuns.get(runId)?.cancelWith({
            mode: params.mode,
            deadlineAt: params.timeoutMs === undefined ? undefined : clock.now() + params.timeoutMs,
            recursive: true,
            cause: params.cause,
            reason: params.reason,
          });
        }
      },
    },
  });

  const obtainHost = (ownerId: string, sessionId: string): SessionHost => {
    const key = keyOf(ownerId, sessionId);
    let host = sessions.get(key);
    if (host === undefined) {
      host = new SessionHost(
        { ownerId, sessionId },
        boundSessionMachine,
        { clock, inspect },
        reportError,
      );
      sessions.set(key, host);
    }
    touch(host);
    return host;
  };

  /**
   * Notes activity in a session (a start, a dequeue, a settlement) and makes sure its eviction
   * timer is armed. One timer per session, not one per run: when it fires, a session idle for
   * `sessionIdleTtlMs` since its last activity is stopped; an idle one that was active since is
   * given the rest; a busy one is left alone until its next activity arms the timer again.
   */
  function touch(host: SessionHost): void {
    host.touchedAt = clock.now();
    if (host.evictionTimer === undefined) armEviction(host, sessionIdleTtlMs);
  }

  function armEviction(host: SessionHost, delayMs: number): void {
    if (shuttingDown()) return;
    host.evictionTimer = clock.setTimeout(() => {
      host.evictionTimer = undefined;
      if (!host.idle) return;
      const idleForMs = clock.now() - host.touchedAt;
      if (idleForMs < sessionIdleTtlMs) armEviction(host, sessionIdleTtlMs - idleForMs);
      else {
        host.actor.stop();
        sessions.delete(keyOf(host.key.ownerId, host.key.sessionId));
      }
    }, delayMs);
    // Housekeeping never keeps the process alive on its own.
    unrefTimer(host.evictionTimer);
  }

  function disarmEviction(host: SessionHost): void {
    if (host.evictionTimer === undefined) return;
    clock.clearTimeout(host.evictionTimer);
    host.evictionTimer = undefined;
  }

  // Listeners are called in a microtask, in log order, never inside an actor's transition: a
  // listener that cancels or starts runs cannot re-enter a run mid-step.
  const pendingNotifications: Array<[RunplaneEvent, SessionKey]> = [];
  const flushNotifications = () => {
    for (const [event, key] of pendingNotifications.splice(0)) {
      for (const listener of listeners) {
        try {
          listener(event, key);
        } catch (error) {
          reportError(error);
        }
      }
    }
  };

  const append = (run: AgentRun<unknown>, type: string, payload: Record<string, unknown>): void => {
    const key = { ownerId: run.ownerId, sessionId: run.sessionId };
    let event: RunplaneEvent;
    try {
      event = eventLog.append({}, key, { runId: run.id, type, payload, at: clock.now() });
    } catch (error) {
      // The run's lifecycle goes on; the lost event is reported, never silently dropped.
      reportError(
        new RunplaneError('STORE_FAILED', `could not log ${type} of run ${run.id}`, {
          cause: error,
        }),
      );
      return;
    }
    if (listeners.size === 0) return;
    if (pendingNotifications.push([event, key]) === 1) queueMicrotask(flushNotifications);
  };

  /**
   * The session log's last seq now: nothing of a run prepared now (its id is fresh) lies at or
   * before it, so reading the run's events can start there. 0 (read all) if the store fails.
   */
  const logEndOf = (key: SessionKey): number => {
    try {
      return eventLog.lastSeq({}, key);
    } catch {
      return 0;
    }
  };

  const createRun = <TOutput>(init: {
    ownerId: string;
    sessionId: string;
    agent: Agent<unknown, TOutput>;
    input: unknown;
    timeoutMs: number | undefined;
    signal: AbortSignal | undefined;
    runId: string | undefined;
    parent: AgentRun<unknown> | undefined;
  }): AgentRun<TOutput> => {
    const runId = init.runId ?? createRunId();
    // Never reused: not live anywhere, and never logged in this session.
    if (
      liveRuns.has(runId) ||
      (init.runId !== undefined &&
        eventLog.hasRun({}, { ownerId: init.ownerId, sessionId: init.sessionId }, runId))
    ) {
      throw new InvalidArgumentError(
        'runId',
        `expected \`runId\` to be unused, got ${JSON.stringify(runId)}`,
      );
    }
    // Field by field: spreading `init` here took V8's slow path (about a tenth of a lifecycle).
    const run = new AgentRun<TOutput>({
      core,
      runId,
      ownerId: init.ownerId,
      sessionId: init.sessionId,
      agent: init.agent,
      input: init.input,
      timeoutMs: init.timeoutMs,
      signal: init.signal,
      parent: init.parent,
      logFloor: logEndOf(init),
    });
    liveRuns.set(runId, run);
    run.activate();
    return run;
  };

  const core: RuntimeCore = {
    clock,
    eventLog,
    unwindTimeoutMs,
    runMachine: boundRunMachine,
    inspect,
    startRun(run) {
      if (run.parentRunId !== undefined) {
        run.admit(); // nested runs bypass the session: CREATED → QUEUED → RUNNING at once
        return;
      }
      if (run.hasNoBudget) {
        run.enqueue(); // a zero budget is spent at once: CANCELLED (timeout), never in a session
        return;
      }
      const host = obtainHost(run.ownerId, run.sessionId);
      const { strategy, graceMs } = strategyOf.get(run.id) ?? {
        strategy: 'enqueue',
        graceMs: 5_000,
      };
      if (strategy === 'reject' && host.busy) {
        run.cancelWith({ ...shutdownRequest('session busy'), cause: 'cancel' });
        throw new SessionBusyError(run.sessionId, host.activeRunId);
      }
      // The session decides first: with a free slot it admits the run in this very step
      // (CREATED → QUEUED → RUNNING), otherwise the run waits in its queue.
      host.actor.send({
        type: 'session.enqueue',
        runId: run.id,
        strategy: strategy === 'reject' ? 'enqueue' : strategy,
        graceMs,
      });
      run.enqueue();
    },
    spawnNested(parent, agent, input, spawnOptions: SpawnOptions | undefined) {
      if (shuttingDown()) throw new ShuttingDownError();
      const child = createRun({
        ownerId: parent.ownerId,
        sessionId: parent.sessionId,
        agent,
        input,
        timeoutMs: spawnOptions?.timeoutMs,
        signal: undefined,
        runId: undefined,
        parent,
      });
      child.start();
      return child;
    },
    appendEvent: append,
    onStatusChange(run, from, to, context) {
      const topLevel = run.parentRunId === undefined;
      if (to === 'QUEUED' && topLevel) append(run, 'session.run_queued', { run_id: run.id });
      if (to === 'RUNNING' && topLevel) append(run, 'session.run_started', { run_id: run.id });
      append(run, 'run.status', { from, to });
      if (to === 'COMPLETED') {
        append(run, 'run.completed', {
          reason: context.interruptRequested ? 'interrupted' : 'completed',
        });
      } else if (to === 'FAILED') {
        const error = context.error;
        append(run, 'run.failed', {
          error: error instanceof Error ? error.message : String(error),
        });
      } else if (to === 'CANCELLED') {
        append(run, 'run.cancelled', {
          cause: context.cause ?? 'cancel',
          escalated: context.escalated,
          reason: context.cancel?.reason ?? null,
        });
        // Queued, or started but still CREATED: the session enqueues a run before the run
        // itself moves to QUEUED, and something the enqueue set off (an interrupted agent's
        // listener, say) may have cancelled it in between.
        const waiting = from === 'QUEUED' || (from === 'CREATED' && run.started);
        if (waiting && topLevel) {
          const host = hostFor(run);
          if (host !== undefined) {
            touch(host);
            host.actor.send({ type: 'session.dequeue', runId: run.id });
          }
        }
      }
    },
    onSettled(run, outcome: RunOutcome<unknown>) {
      if (outcome.status === 'CANCELLED' && outcome.unsettled) {
        append(run, 'run.unsettled', { unwind_timeout_ms: unwindTimeoutMs });
        if (shuttingDown()) abandonedDuringShutdown = true;
      }
      liveRuns.delete(run.id);
      strategyOf.delete(run.id);
      if (run.parentRunId === undefined) {
        const host = hostFor(run);
        if (host?.activeRunId === run.id) {
          touch(host);
          host.actor.send({ type: 'session.run_settled', runId: run.id });
        }
      }
      notifyIfAllSettled();
    },
    reportError,
    agentServices: (run, bound) =>
      createAgentServices(
        { clock, inbox: inboxStore, sessionStore, approvals },
        {
          runId: run.id,
          ownerId: run.ownerId,
          sessionId: run.sessionId,
          // Read when a service needs it: the run's AbortSignal is created on first use.
          get signal() {
            return bound.signal;
          },
          emit: bound.emit,
          emitUnfenced: (type, payload) => append(run, type, payload),
          isLive: bound.isLive,
          isAbandoned: bound.isAbandoned,
        },
      ),
  };

  const answer = (
    ownerId: string,
    sessionId: string,
    runId: string,
    act: (run: AgentRun<unknown>) => void,
  ): 'accepted' | 'not_found' | 'ended' => {
    const run = liveRuns.get(runId);
    if (run !== undefined && run.ownerId === ownerId && run.sessionId === sessionId) {
      if (run.status === 'COMPLETED' || run.status === 'FAILED' || run.status === 'CANCELLED')
        return 'ended';
      act(run);
      return 'accepted';
    }
    return eventLog.hasRun({}, { ownerId, sessionId }, runId) ? 'ended' : 'not_found';
  };

  const runs: RunRegistry = {
    find(ownerId, sessionId, runId) {
      const run = liveRuns.get(runId);
      return run !== undefined && run.ownerId === ownerId && run.sessionId === sessionId
        ? run
        : undefined;
    },
    cancel: (ownerId, sessionId, runId, cancelOptions) =>
      answer(ownerId, sessionId, runId, (run) => run.cancel(cancelOptions)),
    interrupt: (ownerId, sessionId, runId, message) =>
      answer(ownerId, sessionId, runId, (run) => run.interrupt(message)),
    get size() {
      return liveRuns.size;
    },
  };

  const session = (ownerId: string, sessionId: string): Session => {
    parseOptions(sessionKeySchema, { ownerId, sessionId }, 'session');
    const peek = () => sessions.get(keyOf(ownerId, sessionId));
    return {
      ownerId,
      sessionId,
      get activeRunId() {
        return peek()?.activeRunId;
      },
      get queuedRunIds() {
        return peek()?.queuedRunIds ?? [];
      },
      interrupt(message) {
        const activeRunId = peek()?.activeRunId;
        const run = activeRunId === undefined ? undefined : liveRuns.get(activeRunId);
        if (run === undefined || run.status !== 'RUNNING') return 'idle';
        run.interrupt(message);
        return 'accepted';
      },
      cancelAll(cancelAllOptions = {}) {
        const host = peek();
        if (host === undefined) return 0;
        const ids = host.queuedRunIds;
        if (cancelAllOptions.includeActive === true && host.activeRunId !== undefined)
          ids.unshift(host.activeRunId);
        let cancelled = 0;
        for (const runId of ids) {
          if (liveRuns.get(runId)?.cancel({ reason: 'cancelAll' }).contributed === true)
            cancelled++;
        }
        return cancelled;
      },
      onIdle() {
        return peek()?.onIdle() ?? Promise.resolve();
      },
    };
  };

  const isSettled = (run: AgentRun<unknown>) => !liveRuns.has(run.id);
  const eachLive = (act: (run: AgentRun<unknown>) => void) => {
    for (const run of [...liveRuns.values()]) if (!isSettled(run)) act(run);
  };
  const runtimeActor = createActor(
    runtimeMachine.provide({
      actions: {
        cancelWaitingRuns: () =>
          eachLive((run) => {
            if (run.status === 'CREATED' || run.status === 'QUEUED') {
              run.cancelWith(shutdownRequest('runtime shutdown'));
            }
          }),
        interruptRunningRuns: () =>
          eachLive((run) => {
            if (run.status === 'RUNNING') run.interruptWith('runtime shutdown', 'shutdown');
          }),
        cancelRemainingRuns: () =>
          eachLive((run) => run.cancelWith(shutdownRequest('shutdown grace period over'))),
        // Runs during the transition into draining/forcing: the snapshot still says accepting.
        checkSettled: () => {
          if (liveRuns.size === 0) {
            runtimeActor.send({ type: 'runtime.all_settled', abandoned: abandonedDuringShutdown });
          }
        },
        stopSessions: () => {
          for (const host of sessions.values()) {
            disarmEviction(host);
            host.actor.stop();
          }
          sessions.clear();
        },
      },
    }),
    { clock, inspect },
  );
  runtimeActor.subscribe({ error: reportError });
  runtimeActor.start();
  // The runtime machine is flat: its value is the state name (no `matches` on the hot path).
  const shuttingDown = () => closing || runtimeActor.getSnapshot().value !== 'accepting';
  let abandonedDuringShutdown = false;
  /** shutdown() was called. */
  let closing = false;

  function notifyIfAllSettled(): void {
    if (liveRuns.size === 0 && shuttingDown() && runtimeActor.getSnapshot().status === 'active') {
      runtimeActor.send({ type: 'runtime.all_settled', abandoned: abandonedDuringShutdown });
    }
  }

  const shutdownResult = new Promise<{ drained: boolean }>((resolve) => {
    runtimeActor.subscribe({
      complete: () => resolve({ drained: runtimeActor.getSnapshot().output?.drained ?? false }),
    });
  });

  const shutdown = (shutdownOptions: { graceMs?: number } = {}): Promise<{ drained: boolean }> => {
    const { graceMs } = parseOptions(shutdownSchema, shutdownOptions, 'options');
    if (runtimeActor.getSnapshot().status === 'active') {
      // Set first: the runtime machine's draining entry actions run before its snapshot says
      // so, and a listener they trigger must not prepare a new run.
      closing = true;
      runtimeActor.send({ type: 'runtime.shutdown', graceMs: graceMs ?? 10_000 });
    }
    return shutdownResult;
  };

  const approvalSchema = z.object({
    ownerId: nonEmptyString,
    sessionId: nonEmptyString,
    toolUseId: nonEmptyString,
    decision: z.object({
      allow: z.boolean({ error: 'a boolean' }),
      message: z.string({ error: 'a string' }).optional(),
    }),
  });

  return {
    clock,
    eventLog,
    runs,
    sessionStore,
    inbox: createRuntimeInbox(inboxStore, clock),
    approve(ownerId, sessionId, toolUseId, decision) {
      parseOptions(approvalSchema, { ownerId, sessionId, toolUseId, decision }, 'approve');
      return approvals.decide({ ownerId, sessionId }, toolUseId, {
        allow: decision.allow,
        message: decision.message,
      })
        ? 'accepted'
        : 'not_found';
    },
    pendingApprovals(ownerId, sessionId) {
      return approvals.pendingIn({ ownerId, sessionId });
    },
    prepare<TInput, TOutput>(prepareOptions: PrepareOptions<TInput, TOutput>): AgentRun<TOutput> {
      const parsed = parseOptions(prepareSchema, prepareOptions, 'options');
      if (shuttingDown()) throw new ShuttingDownError();
      const run = createRun<TOutput>({
        ownerId: parsed.ownerId,
        sessionId: parsed.sessionId,
        agent: prepareOptions.agent,
        input: prepareOptions.input,
        timeoutMs: parsed.timeoutMs,
        signal: parsed.signal,
        runId: parsed.runId,
        parent: undefined,
      });
      if (parsed.strategy !== undefined || parsed.graceMs !== undefined) {
        strategyOf.set(run.id, {
          strategy: parsed.strategy ?? 'enqueue',
          graceMs: parsed.graceMs ?? 5_000,
        });
      }
      return run;
    },
    session,
    onEvent(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    reportError,
    shutdown,
  };
}
