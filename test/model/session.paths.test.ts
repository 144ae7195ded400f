/**
 * Model-based: paths through session.machine (composed with its runs' and the runtime's
 * synchronous answers, see session-model.ts) replayed against the real runtime. Run names `a`,
 * `b`, `c` stand for runs: each `start x` prepares and starts a fresh real run under that name.
 * After every step the real session (its actor's state, `activeRunId`, `queuedRunIds`, its
 * children, the runs still live) must equal the machine's.
 *
 * `prepare()` must throw `SESSION_QUEUE_FULL` and `start()` `SESSION_BUSY` exactly when the
 * model refuses the prepare or rejects the start.
 *
 * Gate `free`: no `maxConcurrentRuns`. Gate `held`: `maxConcurrentRuns: 1` and a rival session
 * that always holds or waits for the slot; "slot granted" is the rival's run ending. A third
 * setting, `maxQueuedRuns: 2` with a free gate, fills the session with two runs.
 */
import { describe, expect, it } from 'vitest';
import type { AnyActorRef, StateValue } from 'xstate';
import { sessionMachine, type SessionStrategy } from '../../machines/session.machine.js';
import { SessionQueueFullError } from '../../src/errors.js';
import { createRuntime, SessionBusyError, type AgentRun, type Runtime } from '../../src/index.js';
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
  childrenOf,
  describeSessionEvent,
  describeSessionState,
  endedRun,
  GRACE_MS,
  isSettle,
  leaf,
  MAX_QUEUED_RUNS,
  runNames,
  serializeSessionState,
  sessionEventIsRealizable,
  sessionEvents,
  sessionModel,
  sessionTableEvents,
  UNWIND_MS,
  type Gate,
  type ModelRunInput,
  type SessionModelEvent,
  type SessionSnapshot,
} from './session-model.js';
import { pathKinds } from './path-kinds.js';

const ownerId = 'alice';
const sessionId = 's';

/**
 * A runtime to replay against: its gate, its `maxQueuedRuns`, and whether simple paths are
 * generated (the full session only gets shortest paths and self-loops).
 */
interface Setting {
  readonly name: string;
  readonly gate: Gate;
  readonly maxQueuedRuns: number;
  readonly simplePaths: boolean;
}

const settings: readonly Setting[] = [
  { name: 'free gate', gate: 'free', maxQueuedRuns: MAX_QUEUED_RUNS, simplePaths: true },
  { name: 'held gate', gate: 'held', maxQueuedRuns: MAX_QUEUED_RUNS, simplePaths: true },
  // Two runs fill the session: a third prepare() is refused (SESSION_QUEUE_FULL).
  { name: 'free gate, maxQueuedRuns 2', gate: 'free', maxQueuedRuns: 2, simplePaths: false },
];

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

/** The session's root actor (the one whose context holds the queue), if it was created. */
const sessionActor = (actors: readonly AnyActorRef[]): AnyActorRef | undefined =>
  actors.find((ref) => {
    const context = (ref.getSnapshot() as { context?: { sessionId?: string; queue?: unknown } })
      .context;
    return context?.sessionId === sessionId && context.queue !== undefined;
  });

/**
 * Prepares and starts the run named by a model "start x".
 *
 * @returns `'started'`, `'busy'` when `start()` threw `SESSION_BUSY`, `'full'` when `prepare()`
 *   threw `SESSION_QUEUE_FULL`
 */
function startRun(system: SessionSystem, run: ModelRunInput): 'started' | 'busy' | 'full' {
  let handle: AgentRun<unknown>;
  try {
    handle = system.runtime.prepare({
      ownerId,
      sessionId,
      agent: system.agent,
      input: null,
      strategy: run.strategy,
      graceMs: GRACE_MS,
      runId: `${run.runId}${system.serial++}`,
    });
  } catch (error) {
    if (error instanceof SessionQueueFullError) return 'full';
    throw error;
  }
  system.runs.set(run.runId, handle);
  system.names.set(handle.id, run.runId);
  try {
    handle.start();
    return 'started';
  } catch (error) {
    if (error instanceof SessionBusyError) return 'busy';
    throw error;
  }
}

function adapterFor({
  gate,
  maxQueuedRuns,
}: Setting): PathAdapter<SessionSnapshot, SessionModelEvent, SessionSystem> {
  return {
    async setup() {
      const clock = createTestClock();
      const actors: AnyActorRef[] = [];
      const errors: unknown[] = [];
      const runtime = createRuntime({
        clock,
        // Settling is a step of its own: never abandon an agent during a path.
        unwindTimeoutMs: UNWIND_MS,
        maxQueuedRuns,
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

    async execute(system, event, { from }) {
      const { runtime, agent, clock } = system;
      const ended = endedRun(event);
      if (event.type === 'session.prepare') {
        const run = event.run as ModelRunInput;
        // prepare() is refused exactly when the session is full; start() with `reject` exactly
        // when the session has work (active, or waiting for a slot).
        const verdict =
          from.context.children.size >= maxQueuedRuns
            ? 'full'
            : run.strategy === 'reject' && !from.matches('idle')
              ? 'busy'
              : 'started';
        expect(startRun(system, run), `start ${run.runId}`).toBe(verdict);
      } else if (ended !== undefined) {
        const run = system.runs.get(ended);
        if (run === undefined) throw new Error(`no run named ${ended}`);
        if (isSettle(event)) agent.complete(run.id, 'done');
        else {
          run.cancel();
          // The agent ignores its abort; the active run ends once its agent gives up.
          if (from.context.activeRunId === ended) agent.fail(run.id, new Error('gave up'));
        }
      } else if (event.type === 'session.slot_granted') {
        const holder = runtime.session(ownerId, 'rival').activeRunId;
        if (holder !== undefined) system.rivalAgent.complete(holder, 'rival done');
      } else {
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
      const actor = sessionActor(actors);
      const snapshot = actor?.getSnapshot() as
        { value: StateValue; children: Record<string, unknown> } | undefined;
      const nameOf = (id: string) => names.get(id) ?? id;
      const queued = session.queuedRunIds.map(nameOf);
      const active = session.activeRunId;
      return {
        state: snapshot === undefined ? 'idle' : leaf(snapshot.value),
        active: active === undefined ? undefined : nameOf(active),
        queued,
        queuedStatuses: queued.map((name) => runs.get(name)?.status),
        // The session's children, by run (their child ids are recycled).
        children: Object.keys(snapshot?.children ?? {})
          .map((childId) => {
            const ref = snapshot?.children[childId] as
              { getSnapshot(): { context: { runId: string } } } | undefined;
            return nameOf(ref?.getSnapshot().context.runId ?? childId);
          })
          .sort(),
        // The latest run under each name that the runtime still finds (has not settled).
        live: [...runs.entries()]
          .filter(([, run]) => runtime.runs.find(ownerId, sessionId, run.id) !== undefined)
          .map(([name]) => name)
          .sort(),
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
        children: childrenOf(snapshot),
        live: childrenOf(snapshot),
      };
    },

    async teardown({ runtime, clock, errors }) {
      const shutdown = runtime.shutdown({ graceMs: 0 });
      await clock.advance(UNWIND_MS);
      await shutdown;
      expect(errors).toEqual([]);
      expect(runtime.runs.size).toBe(0);
      expect(clock.pendingTimers).toBe(0);
    },
  };
}

function optionsFor({ gate, maxQueuedRuns }: Setting, names: readonly string[]) {
  return {
    events: sessionEvents,
    filterEvents: sessionEventIsRealizable(gate, names),
    serializeState: serializeSessionState,
    input: { ownerId, sessionId, maxQueuedRuns },
    describeState: describeSessionState,
    describeEvent: describeSessionEvent,
    // Several interrupting runs may wait at once (a set of them is part of the state).
    limit: 40_000,
  };
}

/**
 * In idle every strategy admits the run (the README's table: "same"). Simple paths give each
 * name two of the four there, so that each return to idle doubles their number instead of
 * quadrupling it, and every strategy still starts a run from idle.
 */
const idleStrategies: Readonly<Record<string, readonly SessionStrategy[]>> = {
  a: ['enqueue', 'reject'],
  b: ['interrupt', 'preempt'],
};

function simplePathOptions(setting: Setting) {
  const options = optionsFor(setting, Object.keys(idleStrategies));
  const realizable = options.filterEvents;
  return {
    ...options,
    filterEvents: (snapshot: SessionSnapshot, event: SessionModelEvent) =>
      realizable(snapshot, event) &&
      (event.type !== 'session.prepare' ||
        !snapshot.matches('idle') ||
        (idleStrategies[event.run.runId] ?? []).includes((event.run as ModelRunInput).strategy)),
  };
}

/**
 * The README's session rules as a table: which events each session state handles.
 *
 * - `prepare()` spawns the run as the session's child in every state, while the session has
 *   room (`maxQueuedRuns` runs that have not settled).
 * - Every `start()` gets a verdict in every state: admitted or queued when idle; queued or
 *   rejected (`reject`) when busy, `interrupt` first in line, `preempt` after cancelling the
 *   queued runs.
 * - The session hears every run's end, in every state: it leaves the queue wherever it stood,
 *   and an active run's end frees the slot.
 * - A granted slot is only taken while waiting for one; the `interrupt` grace only runs out while
 *   interrupting.
 */
function designHandles(snapshot: SessionSnapshot, event: SessionModelEvent): boolean {
  if (endedRun(event) !== undefined) return true;
  switch (event.type) {
    case 'session.prepare':
      return snapshot.context.children.size < snapshot.context.maxQueuedRuns;
    case 'session.start':
      return true;
    case 'session.slot_granted':
      return snapshot.matches('waiting');
    default:
      return snapshot.matches('interrupting'); // the grace timer
  }
}

for (const setting of settings) {
  const { gate } = setting;
  describe(`session.machine (${setting.name}): coverage`, () => {
    const coverage = getMachineCoverage(sessionMachine, sessionModel(gate), {
      ...optionsFor(setting, runNames),
      tableEvents: sessionTableEvents,
    });

    it('every state is reachable with events the runtime can produce', () => {
      // With a free gate a slot request is granted in the same step: nothing rests in `waiting`.
      const expectedUnreachable = gate === 'free' ? ['waiting'] : [];
      expect(coverage.unreachableStates).toEqual(expectedUnreachable);
    });

    it('every event is handled or explicitly ignored in every reachable state, as the README says', () => {
      const disagreements = coverage.handling
        .filter((h) => (h.verdict === 'handled') !== designHandles(h.snapshot, h.eventObject))
        .map((h) => `${h.state} / ${h.event}: machine ${h.verdict}`);
      expect(disagreements).toEqual([]);
    });

    it('an ignored event changes nothing', () => {
      expect(coverage.ignoredButChanging).toEqual([]);
    });
  });

  describe(`session.machine (${setting.name}) paths replayed against the runtime`, () => {
    const adapter = adapterFor(setting);
    // Shortest paths (and self-loops) over three runs; simple paths over two, where their number
    // stays in the hundreds (over three it runs into the millions).
    const paths = [
      ...getReplayPaths(sessionModel(gate), {
        ...optionsFor(setting, runNames),
        adapter,
        kinds: pathKinds(['shortest', 'ignored']),
      }),
      ...(setting.simplePaths && pathKinds().includes('simple')
        ? getReplayPaths(sessionModel(gate), {
            ...simplePathOptions(setting),
            adapter,
            kinds: ['simple'],
          })
        : []),
    ];
    const unique = [...new Map(paths.map((p) => [p.name, p])).values()];
    const full = setting.maxQueuedRuns < runNames.length;

    it('generates shortest and simple paths, and self-loops: rejections and refused prepares', () => {
      expect(new Set(unique.map((p) => p.kind))).toEqual(
        new Set(pathKinds(setting.simplePaths ? undefined : ['shortest', 'ignored'])),
      );
      // A path of kind `ignored` ends with a step that leaves the session as it was. The events
      // the session ignores (see the coverage above) are ones the runtime never sends, except a
      // prepare into a full session, which the runtime refuses with SESSION_QUEUE_FULL. The
      // other such steps are rejections: the run is spawned, rejected and gone in one step.
      const selfLoops = unique
        .filter((p) => p.kind === 'ignored')
        .map((p) => describeSessionEvent(p.events.at(-1) as SessionModelEvent));
      const rejections = selfLoops.filter((name) => /^start [abc] \(reject\)$/.test(name));
      expect(rejections.length).toBeGreaterThan(0);
      const refused = selfLoops.filter((name) => !rejections.includes(name));
      if (full) expect(refused.length).toBeGreaterThan(0);
      expect(refused.filter((name) => !full || !/^start [abc]/.test(name))).toEqual([]);
    });

    for (const path of unique) {
      it(path.name, () => path.replay());
    }
  });
}
