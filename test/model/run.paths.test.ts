/**
 * Model-based: every shortest and simple path through run.machine (and the shortest path to each
 * state followed by one event that state ignores) is replayed against the real runtime, with a
 * scripted agent and a test clock; after every step the runtime's observable state (status,
 * the run actor's state, the session's active and queued runs, the agent's view, the outcome)
 * must equal the machine's.
 *
 * A blocker run occupies the session first, so `run.admit` is real: completing the blocker makes
 * the session admit the run. `run.start(admitted)` completes the blocker before the start, so
 * the session admits the run in the same step as its start.
 */
import { describe, expect, it } from 'vitest';
import type { AnyActorRef } from 'xstate';
import { runMachine } from '../../machines/run.machine.js';
import type { RunModelEvent as RunMachineEvent } from './run-model.js';
import { pathKinds } from './path-kinds.js';
import { createRuntime, type AgentRun, type RunOutcome, type Runtime } from '../../src/index.js';
import {
  createScriptedAgent,
  createTestClock,
  getMachineCoverage,
  getReplayPaths,
  type PathAdapter,
  type ScriptedAgent,
  type TestClock,
} from '../../src/testing/index.js';
import {
  describeRunEvent,
  describeRunState,
  isSettledState,
  outcomeOf,
  runEventIsRealizable,
  runModelMachine,
  runEvents,
  runInput,
  serializeRunState,
  signalAbortedIn,
  topOf,
  TIMEOUT_MS,
  UNWIND_MS,
  type RunSnapshot,
} from './run-model.js';

interface RunSystem {
  runtime: Runtime;
  clock: TestClock;
  agent: ScriptedAgent<unknown>;
  blockerAgent: ScriptedAgent<unknown>;
  run: AgentRun<unknown>;
  actors: AnyActorRef[];
  outcome: { value?: RunOutcome };
  errors: unknown[];
}

const { ownerId, sessionId } = runInput;

const adapter: PathAdapter<RunSnapshot, RunMachineEvent, RunSystem> = {
  async setup() {
    const clock = createTestClock();
    const actors: AnyActorRef[] = [];
    const errors: unknown[] = [];
    const runtime = createRuntime({
      clock,
      unwindTimeoutMs: UNWIND_MS,
      reportError: (error) => errors.push(error),
      inspect: (event) => {
        if (event.type === '@xstate.actor') actors.push(event.actorRef as AnyActorRef);
      },
    });
    // Hold a safe-point cancel instead of rejecting, so that unwinding stays observable; ignore
    // the abort, so that settling is a step of its own.
    const agent = createScriptedAgent({ onAbort: 'ignore', onSafePointCancel: 'hold' });
    const blockerAgent = createScriptedAgent();
    const blocker = runtime.prepare({
      ownerId,
      sessionId,
      agent: blockerAgent,
      input: null,
      runId: 'blocker',
    });
    blocker.start();
    const run = runtime.prepare({
      ownerId,
      sessionId,
      agent,
      input: null,
      timeoutMs: TIMEOUT_MS,
      runId: runInput.runId,
    });
    const outcome: RunSystem['outcome'] = {};
    void run.termination.then((value) => (outcome.value = value));
    await clock.flush();
    return { runtime, clock, agent, blockerAgent, run, actors, outcome, errors };
  },

  async execute(system, event, { from }) {
    const { run, agent, clock } = system;
    switch (event.type) {
      case 'run.start':
        if (event.verdict === 'admitted') {
          // The session is free when the run starts: the blocker finished first.
          system.blockerAgent.complete('blocker', 'blocker done');
          await clock.flush();
        }
        run.start();
        break;
      case 'run.admit':
        system.blockerAgent.complete('blocker', 'blocker done');
        break;
      case 'run.cancel': {
        const { mode, deadlineAt, recursive } = event.request;
        run.cancel({
          mode,
          recursive,
          ...(deadlineAt === undefined ? {} : { timeoutMs: Math.max(0, deadlineAt - clock.now()) }),
        });
        break;
      }
      case 'run.interrupt':
        run.interrupt(event.message);
        break;
      case 'run.safe_point':
        agent.safePoint(run.id, event.kind);
        break;
      case 'run.deadline':
        await clock.advance((from.context.deadlineAt ?? 0) - clock.now());
        break;
      case 'run.cancel_deadline':
        await clock.advance((from.context.cancel?.deadlineAt ?? 0) - clock.now());
        break;
      case 'agent.done':
        agent.complete(run.id, event.output);
        break;
      case 'agent.error':
        agent.fail(run.id, event.error);
        break;
      default:
        await clock.advance(UNWIND_MS); // the unwind timeout
    }
    await clock.flush();
  },

  observe({ runtime, run, agent, actors, outcome }) {
    const session = runtime.session(ownerId, sessionId);
    const ctx = agent.context(run.id);
    // The run's actor, as XState's inspection API saw it created.
    const actor = actors.find(
      (ref) => (ref.getSnapshot() as { context?: { runId?: string } }).context?.runId === run.id,
    );
    return {
      status: run.status,
      state: actor === undefined ? undefined : describeRunState(actor.getSnapshot() as RunSnapshot),
      active: session.activeRunId,
      queued: session.queuedRunIds,
      live: runtime.runs.find(ownerId, sessionId, run.id) !== undefined,
      executed: agent.executed.includes(run.id),
      interruptRequested: ctx?.interruptRequested ?? false,
      signalAborted: ctx?.signal.aborted ?? false,
      outcome: outcome.value,
    };
  },

  expected(snapshot) {
    const { context } = snapshot;
    const settled = isSettledState(snapshot);
    const top = topOf(snapshot);
    return {
      status: top,
      state: describeRunState(snapshot),
      // The blocker holds the session until `run.admit` (its completion) lets the run in.
      active: context.executor !== 'idle' ? (settled ? undefined : runInput.runId) : 'blocker',
      queued: top === 'QUEUED' ? [runInput.runId] : [],
      live: !settled,
      executed: context.executor !== 'idle',
      interruptRequested: context.interruptRequested,
      signalAborted: signalAbortedIn(snapshot),
      outcome: outcomeOf(snapshot),
    };
  },

  async teardown({ runtime, clock, errors }) {
    const shutdown = runtime.shutdown({ graceMs: 0 });
    await clock.advance(UNWIND_MS * 2);
    await shutdown;
    expect(errors).toEqual([]);
    expect(runtime.runs.size).toBe(0);
    expect(clock.pendingTimers).toBe(0);
  },
};

const options = {
  events: runEvents,
  filterEvents: runEventIsRealizable,
  serializeState: serializeRunState,
  input: runInput,
  describeState: describeRunState,
  describeEvent: describeRunEvent,
};

const paths = getReplayPaths(runModelMachine, { ...options, adapter, kinds: pathKinds() });

/**
 * docs/architecture.md, "A run's life" as a table: which events each state handles. Everything else must be ignored,
 * and an ignored event must change nothing.
 */
function designHandles(snapshot: RunSnapshot, event: RunMachineEvent): boolean {
  const { context } = snapshot;
  const pending = context.cancel;
  switch (describeRunState(snapshot)) {
    case 'CREATED':
      return ['run.start', 'run.cancel', 'run.interrupt'].includes(event.type);
    case 'QUEUED':
      return ['run.admit', 'run.cancel', 'run.interrupt', 'run.deadline'].includes(event.type);
    case 'RUNNING':
      if (event.type === 'run.interrupt') return !context.interruptRequested; // once
      return ['run.cancel', 'agent.done', 'agent.error', 'run.deadline'].includes(event.type);
    case 'cancelling':
      switch (event.type) {
        case 'run.interrupt':
          return !context.interruptRequested;
        case 'run.cancel': // only a request that adds something (merge rules, cancel-request.ts)
          return (
            event.request.mode === 0 ||
            (event.request.mode | (pending?.mode ?? 0)) !== pending?.mode ||
            (event.request.deadlineAt !== undefined &&
              (pending?.deadlineAt === undefined || event.request.deadlineAt < pending.deadlineAt))
          );
        case 'run.safe_point':
          return ((pending?.mode ?? 0) & (event.kind === 'afterChatModel' ? 1 : 2)) !== 0;
        default:
          return ['agent.done', 'agent.error', 'run.deadline', 'run.cancel_deadline'].includes(
            event.type,
          );
      }
    case 'CANCELLED.unwinding':
      return ['agent.done', 'agent.error'].includes(event.type) || event.type.startsWith('xstate.');
    default: // settled: the actor reached its final state and stopped; everything is ignored
      return false;
  }
}

describe('run.machine: coverage', () => {
  const coverage = getMachineCoverage(runMachine, runModelMachine, options);

  it('every state of run.machine is reachable with events the runtime can produce', () => {
    // The terminal statuses wait only for nested runs, which this model never spawns: each is
    // left in the step that enters it (test/machines/run.machine.test.ts shows them waiting).
    expect(coverage.unreachableStates).toEqual(['COMPLETED', 'FAILED', 'CANCELLED.draining']);
    expect(coverage.transientStates).toEqual([]);
  });

  it('every event is handled or explicitly ignored in every reachable state, as docs/architecture.md says', () => {
    const disagreements = coverage.handling
      .filter((h) => (h.verdict === 'handled') !== designHandles(h.snapshot, h.eventObject))
      .map((h) => `${h.state} / ${h.event}: machine ${h.verdict}`);
    expect(disagreements).toEqual([]);
    expect(coverage.handling.length).toBeGreaterThan(runEvents.length * 10);
  });

  it('an ignored event changes nothing', () => {
    expect(coverage.ignoredButChanging).toEqual([]);
  });
});

describe('run.machine paths replayed against the runtime', () => {
  it('generates shortest, simple and ignored-event paths', () => {
    const kinds = new Set(paths.map((p) => p.kind));
    expect([...kinds].sort()).toEqual(pathKinds().sort());
    expect(paths.length).toBeGreaterThan(100);
  });

  for (const path of paths) {
    it(path.name, () => path.replay());
  }
});
