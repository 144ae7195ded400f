/**
 * The session machine as a test model: the parent of its runs, with the runs and the runtime's
 * gate reduced to their synchronous answers.
 *
 * - Model events over run names `a`, `b`, `c`: "start x (strategy)" is a `session.prepare` of a
 *   fresh run named x, whose reaction is its `session.start` (the runtime's `prepare()` then
 *   `start()`); "cancel x" and "x settles" are the child's end, `xstate.done.actor.x` (with a
 *   CANCELLED or a COMPLETED output: the session only reads the actor id); "slot granted";
 *   "grace over" (the `interrupt` strategy's grace timer).
 * - The `run` actor is inert (`fromCallback`): no run machine runs inside the traversal. The
 *   children's synchronous answers are composed in with `withReactions`, keyed on the executed
 *   `xstate.sendTo` actions: a run told `run.start` with verdict `rejected` ends at once, and so
 *   does a run that is sent `run.cancel` while it is not the active one (`preempt` cancelling
 *   the queued runs). A cancel sent to the active run (`preempt` at a safe point, the
 *   `interrupt` grace cancel) ends nothing: the test's agent ignores aborts, the run ends when
 *   its agent settles ("x settles"). With a free gate a slot request is granted at once.
 * - The queue is copied on write: the runtime's session machine mutates its `RunQueue` in place
 *   (O(1) per event over a long queue), which a graph traversal cannot share between snapshots.
 *   Every step works on a copy (`withReactions`' `copy`), so the machine's own in-place actions
 *   (`forgetRun`, `admitHead`) are used as they are; the run's spawn (`spawnRun`, an `assign`
 *   whose `spawn` no executed action shows) is restated as `enqueueActions` + `spawnChild`, so
 *   the reaction below sees it; the actions that are plain functions
 *   writing the context in place (`addStartedToQueue`, `addStartedToQueueFront`,
 *   `setActiveToStarted`, `forgetActiveRun`), which `transition()` hands back without running,
 *   are restated as `assign`s doing the same. Guards, transitions and every other action are the
 *   machine's own.
 * - Two gates: `free` (no `maxConcurrentRuns`: the slot is always free) and `held` (a rival
 *   session always holds or waits for the only slot, so this session waits in `waiting` until
 *   the rival's run ends).
 */
import { assign, enqueueActions, fromCallback } from 'xstate';
import type { ActorLogic, EventFromLogic, StateValue } from 'xstate';
import { ChildIds } from '../../machines/child-ids.js';
import { RunQueue } from '../../machines/run-queue.js';
import { runSystemId } from '../../machines/run.machine.js';
import type { RunMachineInput } from '../../machines/run.types.js';
import {
  sessionMachine,
  type SessionMachineInput,
  type SessionStrategy,
} from '../../machines/session.machine.js';
import { getStatePaths, withReactions } from '../../src/testing/index.js';

export type SessionSnapshot = ReturnType<typeof sessionMachine.getInitialSnapshot>;
/** Every event the session machine takes, its children's ends included. */
export type SessionModelEvent = EventFromLogic<typeof sessionMachine>;
export type Gate = 'free' | 'held';

export const GRACE_MS = 100;
export const UNWIND_MS = 1_000_000;
export const MAX_QUEUED_RUNS = 32;
export const runNames = ['a', 'b', 'c'] as const;
const strategies: readonly SessionStrategy[] = ['enqueue', 'reject', 'interrupt', 'preempt'];
const graceEvent = { type: 'xstate.after.grace.session.interrupting' } as const;

/** The run input of a model "start x": the strategy its `start()` uses rides along. */
export interface ModelRunInput extends RunMachineInput {
  readonly strategy: SessionStrategy;
}

const prepareEvent = (runId: string, strategy: SessionStrategy): SessionModelEvent => {
  const run: ModelRunInput = {
    runId,
    ownerId: 'alice',
    sessionId: 's',
    unwindTimeoutMs: UNWIND_MS,
    maxNestedRuns: MAX_QUEUED_RUNS,
    strategy,
  };
  return { type: 'session.prepare', run };
};

const endEvent = (runId: string, status: 'COMPLETED' | 'CANCELLED'): SessionModelEvent => ({
  type: `xstate.done.actor.${runId}`,
  actorId: runId,
  output: { status },
});

const startEvent = (runId: string, strategy: SessionStrategy): SessionModelEvent => ({
  type: 'session.start',
  runId,
  at: 0,
  strategy,
  graceMs: GRACE_MS,
});

const copyQueue = (queue: RunQueue): RunQueue => {
  const next = new RunQueue();
  for (const id of queue.toArray()) next.add(id);
  return next;
};

const copyChildIds = (table: ChildIds): ChildIds => {
  // Replayed in the same order, the copy hands out the same child ids.
  const next = new ChildIds();
  const ids = table.childIds();
  const width = ids.reduce((max, id) => Math.max(max, Number(id.slice(1)) + 1), 0);
  const placeholders = Array.from({ length: width }, (_, i) => next.take(`\u0000${i}`));
  for (const id of placeholders) {
    const runId = table.runOf(id);
    if (runId === undefined) continue;
    next.release(id);
    next.take(runId);
  }
  for (const id of placeholders) if (table.runOf(id) === undefined) next.release(id);
  return next;
};

/** Each step works on a copy of the queue and the child-id table (see the module note). */
const copySnapshot = (snapshot: SessionSnapshot): SessionSnapshot => ({
  ...snapshot,
  context: {
    ...snapshot.context,
    queue: copyQueue(snapshot.context.queue),
    children: copyChildIds(snapshot.context.children),
  },
});

/** The session machine with inert runs, its in-place actions as assigns, the gate. */
function sessionModelMachine(gate: Gate) {
  return sessionMachine.provide({
    actors: { run: fromCallback(() => undefined) as never },
    guards: { slotFree: () => gate === 'free' },
    actions: {
      addStartedToQueue: assign(({ context, event }) => {
        if (event.type === 'session.start') context.queue.add(event.runId);
        return {};
      }),
      addStartedToQueueFront: assign(({ context, event }) => {
        if (event.type === 'session.start') context.queue.addFirst(event.runId);
        return {};
      }),
      spawnRun: enqueueActions(({ context, event, enqueue }) => {
        if (event.type !== 'session.prepare') return;
        enqueue.spawnChild('run', {
          id: context.children.take(event.run.runId),
          systemId: runSystemId(event.run.runId),
          input: event.run,
        });
      }),
      setActiveToStarted: assign(({ event }) =>
        event.type === 'session.start' ? { activeRunId: event.runId } : {},
      ),
      forgetActiveRun: assign(({ context, event }) => {
        if ('actorId' in event) context.children.release(event.actorId);
        return { activeRunId: undefined, interruptingRunIds: [] };
      }),
    },
  });
}

interface SentTo {
  readonly targetId: string;
  readonly event: { readonly type: string; readonly verdict?: string };
}

/** The session machine composed with its runs' and the runtime's synchronous answers. */
export function sessionModel(
  gate: Gate,
): ActorLogic<SessionSnapshot, SessionModelEvent, SessionMachineInput> {
  const logic = reactingModel(gate);
  // The model names a run's end by the run (`xstate.done.actor.a`); the machine hears it from
  // the run's child actor, whose id is recycled (machines/child-ids.ts).
  return {
    ...logic,
    transition: (snapshot, event, scope) =>
      logic.transition(snapshot, toChildEnd(snapshot, event), scope),
  };
}

function toChildEnd(snapshot: SessionSnapshot, event: SessionModelEvent): SessionModelEvent {
  const runId = endedRun(event);
  const childId = runId === undefined ? undefined : snapshot.context.children.childOf(runId);
  if (runId === undefined || childId === undefined) return event;
  const { output } = event as { output: unknown };
  return { type: `xstate.done.actor.${childId}`, actorId: childId, output };
}

function reactingModel(
  gate: Gate,
): ActorLogic<SessionSnapshot, SessionModelEvent, SessionMachineInput> {
  return withReactions(
    sessionModelMachine(gate),
    (action, snapshot) => {
      switch (action.type) {
        case 'requestSlot':
          return gate === 'free' ? [{ type: 'session.slot_granted' as const }] : undefined;
        case 'xstate.spawnChild': {
          // prepare() returned; the test starts the run at once.
          const { input } = action.params as { id: string; input: ModelRunInput };
          return [startEvent(input.runId, input.strategy)];
        }
        case 'xstate.sendTo': {
          const { targetId, event } = action.params as SentTo;
          const runId = snapshot.context.children.runOf(targetId) ?? targetId;
          // A rejected run ends CANCELLED at once (it never ran).
          // (Sent as the child's own end: its child id, not the run's name.)
          if (event.type === 'run.start' && event.verdict === 'rejected')
            return [endEvent(targetId, 'CANCELLED')];
          // A cancelled run that is not running (queued) ends at once; the active one ends only
          // when its agent settles, which ignores aborts.
          if (event.type === 'run.cancel' && runId !== snapshot.context.activeRunId)
            return [endEvent(targetId, 'CANCELLED')];
          return undefined;
        }
        default:
          return undefined;
      }
    },
    { copy: copySnapshot },
  );
}

/** The model's events: "start x" for every strategy, "cancel x", "x settles", slot, grace. */
export const sessionEvents: readonly SessionModelEvent[] = [
  ...runNames.flatMap((runId) => strategies.map((strategy) => prepareEvent(runId, strategy))),
  ...runNames.map((runId) => endEvent(runId, 'CANCELLED')),
  ...runNames.map((runId) => endEvent(runId, 'COMPLETED')),
  { type: 'session.slot_granted' },
  graceEvent as unknown as SessionModelEvent,
];

/**
 * The events of the handled-or-ignored table: the model's, and every `session.start` (which the
 * model only sends as the reaction to a prepare).
 */
export const sessionTableEvents: readonly SessionModelEvent[] = [
  ...sessionEvents,
  ...runNames.flatMap((runId) => strategies.map((strategy) => startEvent(runId, strategy))),
];

const strategyNote = (strategy: SessionStrategy) =>
  strategy === 'enqueue' ? '' : ` (${strategy})`;

export function describeSessionEvent(event: SessionModelEvent): string {
  if (event.type === 'session.prepare')
    return `start ${event.run.runId}${strategyNote((event.run as ModelRunInput).strategy)}`;
  if (event.type === 'session.start')
    return `session.start ${event.runId}${strategyNote(event.strategy)}`;
  if (event.type === 'session.slot_granted') return 'slot granted';
  if ('actorId' in event) {
    const { status } = (event as { output: { status: string } }).output;
    return status === 'COMPLETED' ? `${event.actorId} settles` : `cancel ${event.actorId}`;
  }
  return 'grace over';
}

/** The run ended (`xstate.done.actor.<id>`), or `undefined` for another event. */
export const endedRun = (event: SessionModelEvent): string | undefined =>
  'actorId' in event ? (event as { actorId: string }).actorId : undefined;

/** Whether the end event is "x settles" (the agent completed) rather than "cancel x". */
export const isSettle = (event: SessionModelEvent): boolean =>
  'output' in event && (event as { output: { status: string } }).output.status === 'COMPLETED';

export const leaf = (value: StateValue): string => {
  const paths = getStatePaths(value);
  return paths.filter((p) => !paths.some((o) => o.startsWith(`${p}.`))).join('|');
};

export function describeSessionState(snapshot: SessionSnapshot): string {
  const { activeRunId, queue } = snapshot.context;
  const queued = queue.toArray();
  return `${leaf(snapshot.value)}[${activeRunId ?? '-'}|${queued.join(',')}]`;
}

export const serializeSessionState = (snapshot: SessionSnapshot): string =>
  JSON.stringify([
    snapshot.value,
    snapshot.context.activeRunId,
    snapshot.context.queue.toArray(),
    [...snapshot.context.interruptingRunIds].sort(),
    childrenOf(snapshot),
  ]);

/** The session's children (its runs that have not ended), by run, sorted. */
export function childrenOf(snapshot: SessionSnapshot): string[] {
  const { children } = snapshot.context;
  return Object.keys(snapshot.children)
    .map((id) => children.runOf(id) ?? id)
    .sort();
}

/**
 * What the runtime can produce: a name is started again only once its run ended; a run is
 * cancelled while queued or active, and settles (its agent completes) only when active.
 */
export function sessionEventIsRealizable(
  gate: Gate,
  names: readonly string[],
): (snapshot: SessionSnapshot, event: SessionModelEvent) => boolean {
  return (snapshot, event) => {
    const { activeRunId, queue } = snapshot.context;
    const ended = endedRun(event);
    if (ended !== undefined) {
      return isSettle(event) ? activeRunId === ended : activeRunId === ended || queue.has(ended);
    }
    switch (event.type) {
      case 'session.prepare':
        return (
          names.includes(event.run.runId) &&
          snapshot.context.children.childOf(event.run.runId) === undefined
        );
      case 'session.slot_granted':
        return gate === 'held' && snapshot.matches('waiting');
      case 'session.start':
        return false; // only as the reaction to a prepare
      default:
        return snapshot.matches('interrupting');
    }
  };
}
