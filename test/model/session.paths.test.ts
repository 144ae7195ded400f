/**
 * Model-based: paths through session.machine (composed with the runtime's synchronous answers,
 * see session-model.ts) replayed against the real runtime. Run names `a`, `b`, `c` stand for
 * runs: each `start x` prepares and starts a fresh real run under that name. After every step
 * the real session (its actor's state, `activeRunId`, `queuedRunIds`) must equal the machine's.
 *
 * Gate `free`: no `maxConcurrentRuns`. Gate `held`: `maxConcurrentRuns: 1` and a rival session
 * that always holds or waits for the slot; "slot granted" is the rival's run ending.
 */
import { describe, expect, it } from 'vitest';
import type { AnyActorRef, StateValue } from 'xstate';
import { sessionMachine, type SessionMachineEvent } from '../../machines/session.machine.js';
import { createRuntime, type AgentRun, type Runtime } from '../../src/index.js';
import {
  createScriptedAgent,
  createTestClock,
  getMachineCoverage,
  getReplayPaths,
  getStatePaths,
  type PathAdapter,
  type PathKind,
  type ScriptedAgent,
  type TestClock,
} from '../../src/testing/index.js';
import {
  describeSessionEvent,
  describeSessionState,
  GRACE_MS,
  runNames,
  serializeSessionState,
  sessionEventIsRealizable,
  sessionEvents,
  sessionModel,
  type Gate,
  type SessionSnapshot,
} from './session-model.js';

const ownerId = 'alice';
const sessionId = 's';
const input = { ownerId, sessionId };

interface SessionSystem {
  runtime: Runtime;
  clock: TestClock;
  agent: ScriptedAgent<unknown>;
  rivalAgent: ScriptedAgent<unknown>;
  runs: Map<string, AgentRun<unknown>>; // name → the latest run started under it
  names: Map<string, string>; // run id → name
  actors: AnyActorRef[];
  errors: unknown[];
  serial: number;
}

const leaf = (value: StateValue): string => {
  const paths = getStatePaths(value);
  return paths.filter((p) => !paths.some((o) => o.startsWith(`${p}.`))).join('|');
};

/** With the `held` gate the rival session always has a run holding or waiting for the slot. */
function ensureRival(system: SessionSystem): void {
  const rival = system.runtime.session(ownerId, 'rival');
  if (rival.activeRunId !== undefined || rival.queuedRunIds.length > 0) return;
  system.runtime
    .prepare({
      ownerId,
      sessionId: 'rival',
      agent: system.rivalAgent,
      input: null,
      runId: `rival-${system.serial++}`,
    })
    .start();
}

function adapterFor(gate: Gate): PathAdapter<SessionSnapshot, SessionMachineEvent, SessionSystem> {
  return {
    async setup() {
      const clock = createTestClock();
      const actors: AnyActorRef[] = [];
      const errors: unknown[] = [];
      const runtime = createRuntime({
        clock,
        // Settling is a step of its own: never abandon an agent during a path.
        unwindTimeoutMs: 1_000_000,
        ...(gate === 'held' ? { maxConcurrentRuns: 1 } : {}),
        reportError: (error) => errors.push(error),
        inspect: (event) => {
          if (event.type === '@xstate.actor') actors.push(event.actorRef as AnyActorRef);
        },
      });
      const system: SessionSystem = {
        runtime,
        clock,
        agent: createScriptedAgent({ onAbort: 'ignore' }),
        rivalAgent: createScriptedAgent(),
        runs: new Map(),
        names: new Map(),
        actors,
        errors,
        serial: 0,
      };
      if (gate === 'held') ensureRival(system);
      await clock.flush();
      return system;
    },

    async execute(system, event) {
      const { runtime, agent, clock } = system;
      switch (event.type) {
        case 'session.enqueue': {
          const run = runtime.prepare({
            ownerId,
            sessionId,
            agent,
            input: null,
            strategy: event.strategy,
            graceMs: event.graceMs,
            runId: `${event.runId}${system.serial++}`,
          });
          system.runs.set(event.runId, run);
          system.names.set(run.id, event.runId);
          run.start();
          break;
        }
        case 'session.dequeue':
          system.runs.get(event.runId)?.cancel();
          break;
        case 'session.run_settled': {
          const run = system.runs.get(event.runId);
          if (run !== undefined) agent.complete(run.id, 'done');
          break;
        }
        case 'session.slot_granted': {
          const holder = runtime.session(ownerId, 'rival').activeRunId;
          if (holder !== undefined) system.rivalAgent.complete(holder, 'rival done');
          break;
        }
        default:
          await clock.advance(GRACE_MS);
      }
      await clock.flush();
      if (gate === 'held') {
        ensureRival(system);
        await clock.flush();
      }
    },

    observe({ runtime, actors, names, runs }) {
      const session = runtime.session(ownerId, sessionId);
      const actor = actors.find((ref) => {
        const context = (ref.getSnapshot() as { context?: { sessionId?: string; queue?: unknown } })
          .context;
        return context?.sessionId === sessionId && context.queue !== undefined;
      });
      const queued = session.queuedRunIds.map((id) => names.get(id) ?? id);
      const active = session.activeRunId;
      return {
        state:
          actor === undefined ? 'idle' : leaf((actor.getSnapshot() as { value: StateValue }).value),
        active: active === undefined ? undefined : (names.get(active) ?? active),
        queued,
        queuedStatuses: queued.map((name) => runs.get(name)?.status),
        activeIsLive:
          active === undefined
            ? undefined
            : runtime.runs.find(ownerId, sessionId, active) !== undefined,
      };
    },

    expected(snapshot) {
      const { activeRunId, queue } = snapshot.context;
      const queued = queue.toArray();
      return {
        state: leaf(snapshot.value),
        active: activeRunId,
        queued,
        queuedStatuses: queued.map(() => 'QUEUED'),
        activeIsLive: activeRunId === undefined ? undefined : true,
      };
    },

    async teardown({ runtime, clock, errors }) {
      const shutdown = runtime.shutdown({ graceMs: 0 });
      await clock.advance(1_000_000);
      await shutdown;
      expect(errors).toEqual([]);
      expect(runtime.runs.size).toBe(0);
      expect(clock.pendingTimers).toBe(0);
    },
  };
}

function optionsFor(gate: Gate, names: readonly string[]) {
  return {
    events: sessionEvents,
    filterEvents: sessionEventIsRealizable(gate, names),
    serializeState: serializeSessionState,
    input,
    describeState: describeSessionState,
    describeEvent: describeSessionEvent,
  };
}

/** docs/architecture.md, "Sessions and the busy-session rule" as a table: which events each session state handles. */
function designHandles(snapshot: SessionSnapshot, event: SessionMachineEvent): boolean {
  const { activeRunId } = snapshot.context;
  if (snapshot.matches('idle')) return event.type === 'session.enqueue';
  if (snapshot.matches('admitting')) {
    return ['session.enqueue', 'session.dequeue', 'session.slot_granted'].includes(event.type);
  }
  // active: new runs queue (or interrupt/preempt), queued runs leave, the active run settles.
  switch (event.type) {
    case 'session.enqueue':
    case 'session.dequeue':
      return true;
    case 'session.run_settled':
      return event.runId === activeRunId; // a stale settle of another run changes nothing
    case 'session.slot_granted':
      return false; // the session holds its slot while active
    default:
      return snapshot.matches({ active: 'interrupting' }); // the grace timer
  }
}

for (const gate of ['free', 'held'] as const) {
  describe(`session.machine (${gate} gate): coverage`, () => {
    const coverage = getMachineCoverage(
      sessionMachine,
      sessionModel(gate),
      optionsFor(gate, runNames),
    );

    it('every state is reachable with events the runtime can produce', () => {
      const expectedUnreachable = gate === 'free' ? ['admitting'] : [];
      expect(coverage.unreachableStates).toEqual(expectedUnreachable);
    });

    it('every event is handled or explicitly ignored in every reachable state, as docs/architecture.md says', () => {
      const disagreements = coverage.handling
        .filter((h) => (h.verdict === 'handled') !== designHandles(h.snapshot, h.eventObject))
        .map((h) => `${h.state} / ${h.event}: machine ${h.verdict}`);
      expect(disagreements).toEqual([]);
    });

    it('an ignored event changes nothing', () => {
      expect(coverage.ignoredButChanging).toEqual([]);
    });
  });

  describe(`session.machine (${gate} gate) paths replayed against the runtime`, () => {
    const adapter = adapterFor(gate);
    // Shortest paths (and ignored events) over three runs; simple paths over two, where their
    // number stays in the hundreds (over three it runs into the millions).
    const paths = [
      ...getReplayPaths(sessionModel(gate), {
        ...optionsFor(gate, runNames),
        adapter,
        kinds: ['shortest', 'ignored'] as PathKind[], // (none: every ignored event is unrealizable)
      }),
      ...getReplayPaths(sessionModel(gate), {
        ...optionsFor(gate, runNames.slice(0, 2)),
        adapter,
        kinds: ['simple'] as PathKind[],
      }),
    ];
    const unique = [...new Map(paths.map((p) => [p.name, p])).values()];

    it('generates shortest and simple paths; the runtime never sends an event the session ignores', () => {
      expect(new Set(unique.map((p) => p.kind))).toEqual(new Set(['shortest', 'simple']));
    });

    for (const path of unique) {
      it(path.name, () => path.replay());
    }
  });
}
