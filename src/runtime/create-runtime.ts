/**
 * createRuntime: the entry point, a façade over the actor tree (docs/architecture.md, "The
 * actor tree"): one root actor per session, whose children are its runs, whose children are
 * their nested runs. The runtime binds the pure machines to the world (clock, event log,
 * agents) and keeps the table of run executors keyed by run id. Its lookups through the session
 * actors' systems are in `runtime-lookups.ts`, its event log appends in `runtime-events.ts`, its
 * shutdown in `runtime-shutdown.ts`.
 *
 * @module
 */
import { trace } from '@opentelemetry/api';
import { fromClockTimer } from '../../machines/clock-timer.js';
import { provideNestedRuns, runMachine } from '../../machines/run.machine.js';
import { terminalRunStatuses } from '../../machines/run.types.js';
import { sessionMachine } from '../../machines/session.machine.js';
import { createAgentServices } from '../agent/agent-services.js';
import { ApprovalBroker } from '../agent/approvals.js';
import { systemClock } from '../clock.js';
import {
  InvalidArgumentError,
  isCancellation,
  SessionQueueFullError,
  ShuttingDownError,
} from '../errors.js';
import type { RunplaneEvent, SessionKey } from '../events/event-log.js';
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
import { createMemorySessionStore } from '../stores/memory-session-store.js';
import { parseOptions } from '../validation.js';
import { RunSlots } from './run-slots.js';
import { createRuntimeEvents } from './runtime-events.js';
import { createRunRegistry, createSessionLookup, keyOf } from './runtime-lookups.js';
import { createRuntimeShutdown } from './runtime-shutdown.js';
import { SessionEviction } from './session-eviction.js';
import {
  approvalSchema,
  defaultMaxQueuedRuns,
  isValidPrepare,
  prepareSchema,
  runtimeOptionsSchema,
  spawnOptionsSchema,
  type PrepareOptions,
  type RuntimeOptions,
} from './runtime-options.js';
import type { Runtime } from './runtime-types.js';

export type { PrepareOptions, RuntimeOptions } from './runtime-options.js';
export type { RunRegistry, Runtime } from './runtime-types.js';

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
          noteAbandoned();
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

  const { append, logEndOf } = createRuntimeEvents(
    eventLog,
    clock,
    telemetry,
    reportError,
    listeners,
  );

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

  const runs = createRunRegistry(sessions, executors, eventLog);
  const session = createSessionLookup(sessions, executors);

  const { shuttingDown, notifyIfAllSettled, noteAbandoned, shutdown } = createRuntimeShutdown(
    clock,
    inspect,
    reportError,
    executors,
    sessions,
    eviction,
  );

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
