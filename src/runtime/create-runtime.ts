/**
 * createRuntime: the entry point, a façade over the actor tree (docs/architecture.md, "The
 * actor tree"): one root actor per session, whose children are its runs, whose children are
 * their nested runs. The runtime binds the pure machines to the world (clock, event log,
 * agents), keeps the table of run executors keyed by run id, and answers lookups through the
 * session actors' systems.
 *
 * @module
 */
import { trace } from '@opentelemetry/api';
import { createActor } from 'xstate';
import { fromClockTimer } from '../../machines/clock-timer.js';
import { CancelMode, type CancelRequest } from '../../machines/cancel-request.js';
import { provideNestedRuns, runMachine } from '../../machines/run.machine.js';
import { runtimeMachine } from '../../machines/runtime.machine.js';
import { terminalRunStatuses } from '../../machines/run.types.js';
import { sessionMachine } from '../../machines/session.machine.js';
import { createAgentServices } from '../agent/agent-services.js';
import { ApprovalBroker } from '../agent/approvals.js';
import { systemClock } from '../clock.js';
import {
  InvalidArgumentError,
  isCancellation,
  RunplaneError,
  SessionQueueFullError,
  ShuttingDownError,
} from '../errors.js';
import {
  toSessionKeyString,
  type RunplaneEvent,
  type SessionKey,
  type StoreContext,
} from '../events/event-log.js';
import { createMemoryEventLog } from '../events/memory-event-log.js';
import { guardInspect } from '../guard-inspect.js';
import { setInspectorOf } from './runtime-inspector.js';
import { createRunId } from '../ids.js';
import { createMemoryInbox } from '../inbox/memory-inbox.js';
import { createOtelRunMetrics } from '../observability/run-metrics.js';
import { RunTelemetry } from '../observability/run-telemetry.js';
import { setTelemetryOf } from '../observability/runtime-telemetry.js';
import { createRuntimeInbox } from '../inbox/runtime-inbox.js';
import type { Agent } from '../run/agent.js';
import { AgentRun } from '../run/agent-run.js';
import { RunExecutor, type RunHost } from '../run/run-executor.js';
import { describeError, logStatusChange } from '../run/run-log.js';
import { SessionHost } from '../session/session-host.js';
import type { Session } from '../session/session.js';
import { createMemorySessionStore } from '../stores/memory-session-store.js';
import { parseOptions } from '../validation.js';
import { RunSlots } from './run-slots.js';
import { SessionEviction } from './session-eviction.js';
import {
  approvalSchema,
  defaultMaxQueuedRuns,
  isValidPrepare,
  prepareSchema,
  runtimeOptionsSchema,
  sessionKeySchema,
  shutdownSchema,
  spawnOptionsSchema,
  type PrepareOptions,
  type RuntimeOptions,
} from './runtime-options.js';
import type { RunRegistry, Runtime } from './runtime-types.js';

export type { PrepareOptions, RuntimeOptions } from './runtime-options.js';
export type { RunRegistry, Runtime } from './runtime-types.js';

const keyOf = (ownerId: string, sessionId: string) => toSessionKeyString({ ownerId, sessionId });

/** The store context of the runtime's own appends: no signal (one object, not one per event). */
const noStoreContext: StoreContext = Object.freeze({});

const shutdownRequest = (reason: string): CancelRequest => ({
  mode: CancelMode.Immediate,
  deadlineAt: undefined,
  recursive: true,
  cause: 'shutdown',
  reason,
  initiator: 'shutdown',
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
  const maxQueuedRuns = options.maxQueuedRuns ?? defaultMaxQueuedRuns;
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
  const telemetry = new RunTelemetry(
    options.tracer ?? trace.getTracer('runplane'),
    options.metrics ?? createOtelRunMetrics(),
    clock,
    reportError,
  );

  /** Every run that has not settled, session runs and nested ones, by run id. */
  const executors = new Map<string, RunExecutor>();
  const sessions = new Map<string, SessionHost>();
  const listeners = new Set<(event: RunplaneEvent, key: SessionKey) => void>();
  const slots = new RunSlots(
    options.maxConcurrentRuns ?? Number.POSITIVE_INFINITY,
    options.maxRunningRunsPerOwner ?? Number.POSITIVE_INFINITY,
  );

  const boundRunMachine = provideNestedRuns(
    runMachine.provide({
      actors: { timer: fromClockTimer(clock) },
      guards: {
        isCancellationError: ({ event }) =>
          event.type === 'agent.error' && isCancellation(event.error),
      },
      actions: {
        startExecutor: ({ self }, runId) => {
          const run = executors.get(runId);
          if (run !== undefined) run.execute();
          else self.send({ type: 'agent.error', error: new Error(`run ${runId} has no agent`) });
        },
        abortExecutor: ({ context }, { cause, reason }) =>
          executors.get(context.runId)?.abortExecutor(cause, reason),
        signalInterrupt: ({ context }) =>
          executors.get(context.runId)?.signalInterrupt(context.interrupt?.message),
        logStatus: ({ context, self }, change) => {
          const run = executors.get(context.runId);
          if (run === undefined) return;
          run.attach(self);
          logStatusChange(
            (type, payload) =>
              append(
                run,
                type,
                // A TurnLoop turn's run names the items it consumed (a loop session's messages).
                type === 'session.run_started' && run.itemIds !== undefined
                  ? { ...payload, item_ids: run.itemIds }
                  : payload,
              ),
            context,
            change,
            telemetry.usageOf(run.id),
          );
          if (terminalRunStatuses.has(change.to)) run.onTerminal(change.to);
        },
        logAbandoned: ({ context }) => {
          const run = executors.get(context.runId);
          if (run !== undefined)
            append(run, 'run.unsettled', { unwind_timeout_ms: unwindTimeoutMs });
          if (shuttingDown()) abandonedDuringShutdown = true;
        },
        reportSettled: ({ context }, output) => executors.get(context.runId)?.settle(output),
        reportRunError: (_, { runId, error }) => failRun(runId, error),
      },
    }),
  );

  /** A run's actor failed (a bug in an action): report it, fail its handle, abort its agent. */
  function failRun(runId: string, error: unknown): void {
    reportError(error);
    const run = executors.get(runId);
    if (run === undefined) return;
    const from = run.status;
    if (!terminalRunStatuses.has(from)) {
      append(run, 'run.status', { from, to: 'FAILED' });
      append(run, 'run.failed', { error: describeError(error) });
    }
    run.fail(error);
  }

  const boundSessionMachine = sessionMachine.provide({
    actors: { run: boundRunMachine },
    guards: { slotFree: ({ context }) => slots.hasFree(context.ownerId) },
    actions: {
      takeSlot: ({ context }) => slots.take(context.ownerId),
      requestSlot: ({ context }) => {
        const host = sessions.get(keyOf(context.ownerId, context.sessionId));
        if (host !== undefined) slots.request(host);
      },
      withdrawSlotRequest: ({ context }) => {
        const host = sessions.get(keyOf(context.ownerId, context.sessionId));
        if (host !== undefined) slots.withdraw(host);
      },
      releaseSlot: ({ context }) => slots.release(context.ownerId),
      reportRunError: (_, { runId, error }) => failRun(runId, error),
    },
  });

  const obtainHost = (ownerId: string, sessionId: string): SessionHost => {
    const key = keyOf(ownerId, sessionId);
    let host = sessions.get(key);
    if (host === undefined) {
      host = new SessionHost(
        // Frozen, and shared by the session's runs (RunExecutor.sessionKey).
        Object.freeze({ ownerId, sessionId }),
        boundSessionMachine,
        maxQueuedRuns,
        { clock, inspect },
        reportError,
      );
      sessions.set(key, host);
    }
    touch(host);
    return host;
  };

  /** Stops sessions idle for `sessionIdleTtlMs` (one timer for all of them). */
  const eviction = new SessionEviction(clock, sessionIdleTtlMs, {
    evict(session) {
      const host = session as SessionHost;
      host.actor.stop();
      sessions.delete(keyOf(host.key.ownerId, host.key.sessionId));
    },
    // A runtime that shuts down arms no timer: it stops every session itself.
    canArm: () => !shuttingDown(),
  });
  const touch = (host: SessionHost): void => eviction.touch(host);

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

  function append(run: RunExecutor, type: string, payload: Record<string, unknown>): void {
    const key = run.sessionKey;
    let event: RunplaneEvent;
    try {
      event = eventLog.append(noStoreContext, key, {
        runId: run.id,
        type,
        payload,
        at: clock.now(),
      });
    } catch (error) {
      // The run's lifecycle goes on; the lost event is reported, never silently dropped.
      reportError(
        new RunplaneError('STORE_FAILED', `could not log ${type} of run ${run.id}`, {
          cause: error,
        }),
      );
      return;
    }
    telemetry.logged(run, type, payload, event.at);
    if (listeners.size === 0) return;
    if (pendingNotifications.push([event, key]) === 1) queueMicrotask(flushNotifications);
  }

  /**
   * The session log's last seq now: nothing of a run prepared now (its id is fresh) lies at or
   * before it, so reading the run's events can start there. 0 (read all) if the store fails.
   */
  const logEndOf = (key: SessionKey): number => {
    try {
      return eventLog.lastSeq(noStoreContext, key);
    } catch {
      return 0;
    }
  };

  /** Creates a run's executor and handle and registers them (its actor comes next). */
  const register = <TOutput>(init: {
    ownerId: string;
    sessionId: string;
    /** The session's frozen key (its host's, or the parent run's). */
    sessionKey: SessionKey;
    agent: Agent<unknown, TOutput>;
    input: unknown;
    runId: string;
    parentRunId: string | undefined;
    strategy: PrepareOptions<unknown, TOutput>['strategy'];
    graceMs: number | undefined;
    itemIds?: readonly string[] | undefined;
  }): [RunExecutor, AgentRun<TOutput>] => {
    // Field by field: spreading `init` here took V8's slow path (about a tenth of a lifecycle).
    const run = new RunExecutor({
      host: runHost,
      runId: init.runId,
      ownerId: init.ownerId,
      sessionId: init.sessionId,
      sessionKey: init.sessionKey,
      parentRunId: init.parentRunId,
      agent: init.agent,
      input: init.input,
      strategy: init.strategy ?? 'enqueue',
      graceMs: init.graceMs ?? 5_000,
      logFloor: logEndOf(init.sessionKey),
      itemIds: init.itemIds,
    });
    executors.set(init.runId, run);
    telemetry.prepared(run);
    const handle = AgentRun.of<TOutput>(run);
    run.handle = handle;
    return [run, handle];
  };

  const runHost: RunHost = {
    clock,
    eventLog,
    appendEvent: append,
    agentServices: (run) =>
      createAgentServices(
        { clock, inbox: inboxStore, sessionStore, approvals },
        {
          runId: run.id,
          ownerId: run.ownerId,
          sessionId: run.sessionId,
          // Read when a service needs it: the run's AbortSignal is created on first use.
          get signal() {
            return run.executorSignal();
          },
          emit: (type, payload) => run.emitFromAgent(type, payload),
          emitUnfenced: (type, payload) => append(run, type, payload),
          isLive: () => run.isLive(),
          isAbandoned: () => run.isAbandoned(),
        },
      ),
    startInSession(run) {
      const host = obtainHost(run.ownerId, run.sessionId);
      host.actor.send({
        type: 'session.start',
        runId: run.id,
        at: clock.now(),
        strategy: run.strategy,
        graceMs: run.graceMs,
      });
      return host.activeRunId;
    },
    spawnNested(parent, agent, input, spawnOptions) {
      const { timeoutMs } = parseOptions(spawnOptionsSchema, spawnOptions ?? {}, 'options');
      if (shuttingDown()) throw new ShuttingDownError();
      const runId = createRunId();
      const [child, handle] = register({
        ownerId: parent.ownerId,
        sessionId: parent.sessionId,
        sessionKey: parent.sessionKey,
        agent,
        input,
        runId,
        parentRunId: parent.id,
        strategy: 'enqueue',
        graceMs: undefined,
      });
      child.started = true;
      // The parent run spawns it as its child and starts it, inside its own chart.
      parent.send({ type: 'run.spawn', runId, timeoutMs, at: clock.now() });
      if (!child.attached) {
        executors.delete(runId);
        telemetry.settled(child);
        throw new SessionQueueFullError(parent.sessionId, maxQueuedRuns, parent.id);
      }
      return handle;
    },
    onSettled(run) {
      executors.delete(run.id);
      telemetry.settled(run);
      const host = sessions.get(keyOf(run.ownerId, run.sessionId));
      if (host !== undefined) touch(host);
      // After this step: the session still has to hear of the run's end.
      if (shuttingDown()) queueMicrotask(notifyIfAllSettled);
    },
    reportError,
    telemetry,
  };

  /** A run still live for exactly this owner and session (found through the session's system). */
  const findLive = (ownerId: string, sessionId: string, runId: string): RunExecutor | undefined =>
    sessions.get(keyOf(ownerId, sessionId))?.runActor(runId) === undefined
      ? undefined
      : executors.get(runId);

  const answer = (
    ownerId: string,
    sessionId: string,
    runId: string,
    act: (run: RunExecutor) => void,
  ): 'accepted' | 'not_found' | 'ended' => {
    const run = findLive(ownerId, sessionId, runId);
    if (run !== undefined) {
      if (terminalRunStatuses.has(run.status)) return 'ended';
      act(run);
      return 'accepted';
    }
    return eventLog.hasRun({}, { ownerId, sessionId }, runId) ? 'ended' : 'not_found';
  };

  const runs: RunRegistry = {
    find: (ownerId, sessionId, runId) => findLive(ownerId, sessionId, runId)?.handle,
    cancel: (ownerId, sessionId, runId, cancelOptions) =>
      answer(ownerId, sessionId, runId, (run) => run.handle?.cancel(cancelOptions)),
    interrupt: (ownerId, sessionId, runId, message) =>
      answer(ownerId, sessionId, runId, (run) => run.interruptWith(message, 'interrupt')),
    get size() {
      return executors.size;
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
      get busy() {
        return peek()?.busy ?? false;
      },
      interrupt(message) {
        const activeRunId = peek()?.activeRunId;
        const run = activeRunId === undefined ? undefined : executors.get(activeRunId);
        if (run === undefined || run.status !== 'RUNNING') return 'idle';
        run.interruptWith(message, 'interrupt');
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
          if (executors.get(runId)?.handle?.cancel({ reason: 'cancelAll' }).contributed === true)
            cancelled++;
        }
        return cancelled;
      },
      onIdle() {
        return peek()?.onIdle() ?? Promise.resolve();
      },
    };
  };

  const eachLive = (act: (run: RunExecutor) => void) => {
    for (const run of [...executors.values()]) if (executors.has(run.id)) act(run);
  };
  // The runtime machine's effects on runs happen one microtask after its transition (in order),
  // never inside it: a run that takes a cancel spawns, stops and tells its children in its own
  // step, and XState's actions must not drive other actors imperatively.
  const afterTransition = (effect: () => void) => () => queueMicrotask(effect);
  const runtimeActor = createActor(
    runtimeMachine.provide({
      actions: {
        cancelWaitingRuns: afterTransition(() =>
          eachLive((run) => {
            if (run.status === 'CREATED' || run.status === 'QUEUED') {
              run.cancelWith(shutdownRequest('runtime shutdown'));
            }
          }),
        ),
        interruptRunningRuns: afterTransition(() =>
          eachLive((run) => {
            if (run.status === 'RUNNING') run.interruptWith('runtime shutdown', 'shutdown');
          }),
        ),
        cancelRemainingRuns: afterTransition(() =>
          eachLive((run) => run.cancelWith(shutdownRequest('shutdown grace period over'))),
        ),
        // Runs during the transition into draining/forcing: the snapshot still says accepting.
        checkSettled: () => {
          if (executors.size === 0) {
            runtimeActor.send({ type: 'runtime.all_settled', abandoned: abandonedDuringShutdown });
          }
        },
        stopSessions: () => {
          eviction.stop();
          for (const host of sessions.values()) host.actor.stop();
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
    if (executors.size === 0 && shuttingDown() && runtimeActor.getSnapshot().status === 'active') {
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

  const runtime: Runtime = {
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
        reason: decision.reason,
      })
        ? 'accepted'
        : 'not_found';
    },
    pendingApprovals(ownerId, sessionId) {
      return approvals.pendingIn({ ownerId, sessionId });
    },
    prepare<TInput, TOutput>(prepareOptions: PrepareOptions<TInput, TOutput>): AgentRun<TOutput> {
      const parsed = parseOptions(prepareSchema, prepareOptions, 'options', isValidPrepare);
      if (shuttingDown()) throw new ShuttingDownError();
      const { ownerId, sessionId } = parsed;
      const runId = parsed.runId ?? createRunId();
      // Never reused: not live anywhere, and never logged in this session.
      if (
        executors.has(runId) ||
        (parsed.runId !== undefined && eventLog.hasRun({}, { ownerId, sessionId }, runId))
      ) {
        throw new InvalidArgumentError(
          'runId',
          `expected \`runId\` to be unused, got ${JSON.stringify(runId)}`,
        );
      }
      const host = obtainHost(ownerId, sessionId);
      const [run, handle] = register<TOutput>({
        ownerId,
        sessionId,
        sessionKey: host.key,
        agent: prepareOptions.agent,
        input: prepareOptions.input,
        runId,
        parentRunId: undefined,
        strategy: parsed.strategy,
        graceMs: parsed.graceMs,
        itemIds: parsed.itemIds,
      });
      // The session spawns the run as its child, in CREATED (unless the session is full).
      host.actor.send({
        type: 'session.prepare',
        run: {
          runId,
          ownerId,
          sessionId,
          timeoutMs: parsed.timeoutMs,
          unwindTimeoutMs,
          maxNestedRuns: maxQueuedRuns,
        },
      });
      const actor = host.runActor(runId);
      if (actor === undefined) {
        executors.delete(runId);
        telemetry.settled(run);
        throw new SessionQueueFullError(sessionId, maxQueuedRuns);
      }
      run.attach(actor);
      const { signal } = parsed;
      if (signal !== undefined) {
        if (signal.aborted) run.cancelBySignal(signal.reason);
        else {
          const onAbort = () => run.cancelBySignal(signal.reason);
          signal.addEventListener('abort', onAbort, { once: true });
          void run.terminal.then(() => signal.removeEventListener('abort', onAbort));
        }
      }
      return handle;
    },
    session,
    onEvent(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    reportError,
    shutdown,
  };
  setInspectorOf(runtime, inspect);
  setTelemetryOf(runtime, telemetry);
  return runtime;
}
