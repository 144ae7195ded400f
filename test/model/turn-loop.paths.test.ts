/**
 * Model-based: paths through turn-loop.machine (composed with the runtime's answer and an
 * environment, see turn-loop-model.ts) replayed against a real TurnLoop on a real runtime. The
 * test holds every asynchronous piece in its hands: the checkpoint store's get/set/delete,
 * genInput, prepareAgent and the turn's agent each wait until the path says how they end.
 * After every step, the real loop actor's state and context (as XState's inspection API shows
 * it, ids and error identities aside) and its exit must equal the machine's.
 *
 * - Full model (a checkpoint store, up to two pushes, every event): the shortest path to every
 *   state, and that path followed by each external event the state ignores.
 * - Core model (no store, one push, push / preempt / run / stop of each mode / the turn's
 *   endings): every simple path. (Over the full model the simple paths run into the millions.)
 */
import { describe, expect, it } from 'vitest';
import type { AnyActorRef } from 'xstate';
import { turnLoopMachine } from '../../machines/turn-loop.machine.js';
import type { TurnLoopInput } from '../../machines/turn-loop.types.js';
import {
  createRuntime,
  createTurnLoop,
  jsonCheckpointCodec,
  type Agent,
  type CheckpointStore,
  type GenInputResult,
  type Runtime,
  type TurnLoop,
  type TurnLoopExit,
} from '../../src/index.js';
import {
  createScriptedAgent,
  createTestClock,
  getMachineCoverage,
  getReplayPaths,
  type PathAdapter,
  type PathKind,
  type ScriptedAgent,
  type TestClock,
} from '../../src/testing/index.js';
import {
  describeLoopEvent,
  describeLoopState,
  IDLE_MS,
  isExternalEvent,
  loopEventIsRealizable,
  loopEvents,
  loopInput,
  planError,
  projectLoop,
  serializeLoopState,
  storeError,
  turnError,
  turnLoopModel,
  type LoopSnapshot,
  type LoopStep,
} from './turn-loop-model.js';
import { pathKinds } from './path-kinds.js';

interface Pending<T> {
  resolve(value: T): void;
  reject(error: unknown): void;
}
const pending = <T>(queue: Array<Pending<T>>): Promise<T> =>
  new Promise<T>((resolve, reject) => queue.push({ resolve, reject }));

interface LoopSystem {
  clock: TestClock;
  runtime: Runtime;
  agent: ScriptedAgent<unknown>;
  loop: TurnLoop<string>;
  store: {
    get: Array<Pending<Uint8Array | undefined>>;
    set: Array<Pending<void>>;
    delete: Array<Pending<boolean>>;
  };
  genInput: Array<Pending<GenInputResult<string>>>;
  prepare: Array<Pending<Agent<unknown, unknown>>>;
  actors: AnyActorRef[];
  exit: { value?: TurnLoopExit<string> };
  errors: unknown[];
}

const encode = (output: {
  kind: string;
  unhandled: readonly unknown[];
  interrupted: readonly unknown[];
  turnSeq: number;
}) =>
  jsonCheckpointCodec.encode({
    format: 'runplane.checkpoint',
    version: 1,
    kind: output.kind as 'between-turns' | 'mid-turn',
    loop: { status: 'active', value: {}, children: {}, context: { turnSeq: output.turnSeq } },
    unhandled: [...output.unhandled],
    interrupted: [...output.interrupted],
    savedAt: 0,
  });

const take = <T>(queue: Array<Pending<T>>, what: string): Pending<T> => {
  const next = queue.shift();
  if (next === undefined) throw new Error(`the path expects ${what}, but nothing waits for it`);
  return next;
};

function adapterFor(input: TurnLoopInput): PathAdapter<LoopSnapshot, LoopStep, LoopSystem> {
  return {
    async setup() {
      const clock = createTestClock();
      const errors: unknown[] = [];
      const runtime = createRuntime({ clock, reportError: (error) => errors.push(error) });
      const agent = createScriptedAgent({ onAbort: 'ignore' });
      const actors: AnyActorRef[] = [];
      const store: LoopSystem['store'] = { get: [], set: [], delete: [] };
      const gated: CheckpointStore = {
        get: () => pending(store.get),
        set: () => pending(store.set),
        delete: () => pending(store.delete),
      };
      const genInput: LoopSystem['genInput'] = [];
      const prepare: LoopSystem['prepare'] = [];
      const loop = createTurnLoop<string>({
        runtime,
        ownerId: 'alice',
        sessionId: 'loop',
        requeuePreempted: input.requeuePreempted,
        ...(input.hasStore ? { store: gated, checkpointId: 'cp' } : {}),
        genInput: () => pending(genInput),
        prepareAgent: () => pending(prepare),
        onAgentEvents: async (_turn, events) => {
          let failed = false;
          for await (const event of events) failed ||= event.type === 'run.failed';
          return failed ? turnError : undefined;
        },
        inspect: (event) => {
          if (event.type === '@xstate.actor') actors.push(event.actorRef as AnyActorRef);
        },
      });
      const exit: LoopSystem['exit'] = {};
      void loop.wait().then((value) => (exit.value = value));
      await clock.flush();
      return { clock, runtime, agent, loop, store, genInput, prepare, actors, exit, errors };
    },

    async execute(system, event) {
      const { loop, agent, clock } = system;
      const runId = () => {
        const id = agent.executed.findLast((r) => agent.isExecuting(r));
        if (id === undefined) throw new Error('no turn run is executing');
        return id;
      };
      const type = event.type as string;
      switch (event.type) {
        case 'loop.push':
          loop.push(
            event.item as string,
            event.preempt === undefined ? {} : { preempt: event.preempt.mode },
          );
          break;
        case 'loop.run':
          loop.run();
          break;
        case 'loop.stop':
          loop.stop({
            mode: event.call.mode,
            ...(event.call.idleForMs === undefined ? {} : { idleForMs: event.call.idleForMs }),
            ...(event.call.skipCheckpoint ? { skipCheckpoint: true } : {}),
          });
          break;
        case 'loop.idle_due':
          await clock.advance(IDLE_MS);
          break;
        case 'turn.started':
        case 'turn.skipped':
        case 'turn.failed': {
          // The turn logic plans: genInput's answer, then (if it consumed something)
          // prepareAgent's; the run then starts on its own.
          const { plan } = event as unknown as {
            plan?: { input: unknown; consumed: string[]; remaining: string[] };
          };
          const answer = take(system.genInput, 'a genInput call');
          if (plan === undefined) {
            answer.reject(planError);
            break;
          }
          answer.resolve({ input: plan.input, consumed: plan.consumed, remaining: plan.remaining });
          if (plan.consumed.length === 0) break;
          await clock.flush();
          const prepared = take(system.prepare, 'a prepareAgent call');
          if (event.type === 'turn.started') prepared.resolve(agent);
          else prepared.reject(storeError);
          break;
        }
        case 'turn.ended':
          if (event.label === 'agent completes' || event.label === 'agent unwinds') {
            agent.complete(runId(), 'done');
          } else if (event.label === 'agent fails') {
            agent.fail(runId(), turnError);
          } else {
            agent.safePoint(runId(), 'afterChatModel');
          }
          break;
        default: {
          const output = (event as unknown as { output?: unknown }).output;
          const ok = type.startsWith('xstate.done.');
          if (type.endsWith('loadCheckpoint')) {
            const get = take(system.store.get, 'a checkpoint read');
            if (ok) get.resolve(output === undefined ? undefined : encode(output as never));
            else get.reject(storeError);
          } else if (type.endsWith('saveCheckpoint')) {
            const set = take(system.store.set, 'a checkpoint write');
            if (ok) set.resolve();
            else set.reject(storeError);
          } else {
            const del = take(system.store.delete, 'a checkpoint delete');
            if (ok) del.resolve(true);
            else del.reject(storeError);
          }
        }
      }
      await clock.flush(3);
    },

    observe({ actors, exit }) {
      const actor = actors.find(
        (ref) =>
          (ref.getSnapshot() as { context?: { settings?: unknown } }).context?.settings !==
          undefined,
      );
      const snapshot = actor?.getSnapshot() as LoopSnapshot | undefined;
      return {
        loop: snapshot === undefined ? undefined : projectLoop(snapshot),
        exit: exit.value && {
          unhandled: exit.value.unhandledItems,
          interrupted: exit.value.interruptedItems,
          dropped: exit.value.droppedItems,
          reason: exit.value.exitReason === undefined ? undefined : 'set',
          checkpointAttempted: exit.value.checkpointAttempted,
          checkpointError: exit.value.checkpointError === undefined ? undefined : 'set',
        },
      };
    },

    expected(snapshot) {
      const c = snapshot.context;
      return {
        loop: projectLoop(snapshot),
        exit:
          snapshot.status === 'done'
            ? {
                unhandled: c.exit?.unhandled ?? [],
                interrupted: c.exit?.interrupted ?? [],
                dropped: c.dropped,
                reason: c.exit?.reason === undefined ? undefined : 'set',
                checkpointAttempted: c.checkpoint.attempted,
                checkpointError: c.checkpoint.error === undefined ? undefined : 'set',
              }
            : undefined,
      };
    },

    async teardown(system) {
      const { loop, agent, clock, runtime, exit, errors } = system;
      for (let round = 0; round < 50 && exit.value === undefined; round++) {
        loop.stop({ mode: 'immediate' });
        for (const get of system.store.get.splice(0)) get.resolve(undefined);
        for (const set of system.store.set.splice(0)) set.resolve();
        for (const del of system.store.delete.splice(0)) del.resolve(true);
        for (const runId of agent.executed)
          if (agent.isExecuting(runId)) agent.complete(runId, 'done');
        await clock.flush(3);
      }
      expect(exit.value).toBeDefined();
      const shutdown = runtime.shutdown({ graceMs: 0 });
      await clock.advance(10_000);
      await shutdown;
      expect(errors).toEqual([]);
      expect(runtime.runs.size).toBe(0);
      expect(clock.pendingTimers).toBe(0);
    },
  };
}

const fullOptions = {
  events: loopEvents,
  filterEvents: loopEventIsRealizable(2),
  serializeState: serializeLoopState,
  input: loopInput,
  describeState: describeLoopState,
  describeEvent: describeLoopEvent,
  limit: 100_000,
};

const coreInput: TurnLoopInput = { ...loopInput, hasStore: false };
const coreLabels = new Set([
  'push i1',
  'push i1 (preempt)',
  'run',
  'stop afterTurn',
  'stop graceful',
  'stop immediate',
  'genInput consumes one, agent prepared, run started',
  'agent completes',
  'agent fails',
  'agent unwinds',
  'agent reaches a safe point',
]);
const coreOptions = {
  ...fullOptions,
  input: coreInput,
  filterEvents: (snapshot: LoopSnapshot, event: LoopStep) =>
    loopEventIsRealizable(1)(snapshot, event) && coreLabels.has(describeLoopEvent(event)),
};

/**
 * docs/architecture.md, "TurnLoop" as a table for the external events: which ones each state handles. The results
 * of invoked logic are addressed to one invocation and are not in this table.
 */
function designHandles(snapshot: LoopSnapshot, event: LoopStep): boolean {
  const at = (state: Parameters<LoopSnapshot['matches']>[0]) => snapshot.matches(state);
  switch (event.type) {
    case 'loop.push': // taken while the buffer is open, refused (a late item) once committed
      return at({ stop: 'open' }) || at({ stop: 'idleWaiting' }) || at({ stop: 'committed' });
    case 'loop.run':
      return at({ loop: 'idle' });
    case 'loop.stop': // a stop is recorded until the loop has exited; later ones escalate
      return !at({ stop: 'closed' });
    case 'loop.idle_due':
      return at({ stop: { idleWaiting: 'idle' } });
    case 'loop.preempt_due': // handled at the root: a due preempt finds its turn or nothing
      return true;
    case 'turn.started': // the plan and the run's start, reported together
    case 'turn.skipped':
    case 'turn.failed':
      return at({ loop: { turn: 'planning' } });
    case 'turn.ended':
      return at({ loop: { turn: 'running' } });
    default:
      return true;
  }
}

describe('turn-loop.machine: coverage', () => {
  const coverage = getMachineCoverage(turnLoopMachine, turnLoopModel, {
    ...fullOptions,
    tableEvents: (snapshot: LoopSnapshot) => loopEvents(snapshot).filter(isExternalEvent),
  });

  it('every state is reachable with events the runtime can produce', () => {
    expect(coverage.unreachableStates).toEqual([]);
    expect(coverage.transientStates).toEqual(['loop.route', 'loop.exiting.deciding']);
  });

  it('every external event is handled or explicitly ignored in every reachable state, as docs/architecture.md says', () => {
    const disagreements = coverage.handling
      .filter((h) => (h.verdict === 'handled') !== designHandles(h.snapshot, h.eventObject))
      .map((h) => `${h.state} / ${h.event}: machine ${h.verdict}`);
    expect([...new Set(disagreements)]).toEqual([]);
  });

  it('an ignored event changes nothing', () => {
    expect([...new Set(coverage.ignoredButChanging)]).toEqual([]);
  });
});

describe('turn-loop.machine paths replayed against a TurnLoop', () => {
  const full = getReplayPaths(turnLoopModel, {
    ...fullOptions,
    adapter: adapterFor(loopInput),
    kinds: pathKinds(['shortest', 'ignored']),
  }).filter((path) => path.kind === 'shortest' || path.events.every(isExternalEvent));
  const coreKinds = pathKinds(['simple']);
  const core =
    coreKinds.length === 0
      ? []
      : getReplayPaths(turnLoopModel, {
          ...coreOptions,
          adapter: adapterFor(coreInput),
          kinds: coreKinds,
        });

  it('generates shortest, ignored-event and simple paths (those MODEL_PATHS allows)', () => {
    const wanted = pathKinds();
    const minimum: Record<PathKind, number> = { shortest: 100, ignored: 100, simple: 50 };
    for (const [kind, atLeast] of Object.entries(minimum) as Array<[PathKind, number]>) {
      const count = [...full, ...core].filter((p) => p.kind === kind).length;
      if (wanted.includes(kind)) expect(count, kind).toBeGreaterThan(atLeast);
      else expect(count, kind).toBe(0);
    }
  });

  for (const path of full) it(`store: ${path.name}`, () => path.replay());
  for (const path of core) it(`no store: ${path.name}`, () => path.replay());
});
