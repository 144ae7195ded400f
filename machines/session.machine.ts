/**
 * The session machine: the parent of a session's runs, which admits one at a time, in start
 * order (docs/architecture.md, "The actor tree" and "The busy-session rule").
 *
 * @remarks
 * Every run is spawned as this actor's child at `prepare()` (`session.prepare`, in CREATED,
 * `systemId` `run:<runId>`), and stays its child until it reaches its final state: the session
 * hears of that through `xstate.done.actor.<runId>` (or `xstate.error.actor.<runId>` if the
 * run's actor failed), frees the run's slot, stops the child and admits the next run. A session
 * holds at most `maxQueuedRuns` runs that have not settled (prepared, queued or running):
 * XState copies a parent's children map on every spawn and stop, so a session with many
 * children makes every run dearer.
 *
 * A run that starts (`session.start`) gets the session's verdict with its `run.start`:
 * `admitted` (a free slot: CREATED → QUEUED → RUNNING in one step), `queued`, or `rejected`.
 * The busy-session strategies (the AgentScope multitask strategies) are decided here and
 * nowhere else:
 *
 * | session | `enqueue` | `reject` | `interrupt` | `preempt` |
 * | --- | --- | --- | --- | --- |
 * | idle | admitted (or queued while waiting for a runtime slot) | same | same | same |
 * | waiting for a runtime slot | queued last | rejected | queued first | queued runs cancelled; queued last |
 * | active | queued last | rejected | queued first; the active run interrupted, cancelled after `graceMs` | queued runs cancelled; the active run cancelled at its next safe point (escalating after `graceMs`); queued last |
 *
 * The runtime-wide gate behind `maxConcurrentRuns` is reached through actions the runtime
 * provides: `slotFree` (guard) / `takeSlot` admit at once; `requestSlot` /
 * `withdrawSlotRequest` / `releaseSlot` wait in the gate's line, which answers
 * `session.slot_granted`.
 *
 * @module
 */
import { setup } from 'xstate';
import type { EventObject } from 'xstate';
import { CancelMode, type CancelCause, type CancelModeValue } from './cancel-request.js';
import { ChildIds } from './child-ids.js';
import { RunQueue } from './run-queue.js';
import { runMachine, runSystemId } from './run.machine.js';
import type { RunMachineEvent } from './run.types.js';
import type {
  RunEndEvent,
  RunErrorParams,
  SessionMachineContext,
  SessionMachineEvent,
  SessionMachineInput,
  SessionStrategy,
} from './session.types.js';

export type { SessionMachineInput, SessionStrategy } from './session.types.js';

/** `T` with its fields writable: for the context fields the per-run actions write in place. */
type Mutable<T> = { -readonly [K in keyof T]: T[K] };

/** The child id of the run that ended, from its `xstate.done.actor.*` / `xstate.error.actor.*`. */
const endedChildId = (event: EventObject): string =>
  'actorId' in event ? (event as RunEndEvent).actorId : '';

/** The run id of the child that ended (see {@link ChildIds}). */
const endedRunId = (context: SessionMachineContext, event: EventObject): string | undefined =>
  context.children.runOf(endedChildId(event));

const startOf = (event: SessionMachineEvent | RunEndEvent) => {
  if (event.type !== 'session.start') throw new Error(`expected session.start, got ${event.type}`);
  return event;
};

/** A cancel the session's strategy sends a run: `preempt` for a preempt, else `strategy`. */
const cancelEvent = (
  mode: CancelModeValue,
  deadlineAt: number | undefined,
  cause: CancelCause,
  reason: string,
): RunMachineEvent => ({
  type: 'run.cancel',
  request: {
    mode,
    deadlineAt,
    recursive: true,
    cause,
    reason,
    initiator: cause === 'preempt' ? 'preempt' : 'strategy',
  },
});

const base = setup({
  types: {
    context: {} as SessionMachineContext,
    events: {} as SessionMachineEvent | RunEndEvent,
    input: {} as SessionMachineInput,
  },
  actors: {
    /** The session's runs; the runtime provides the bound run machine. */
    run: runMachine,
  },
  actions: {
    /** Placeholder: ask the runtime for a run slot; it answers `session.slot_granted`. */
    requestSlot: () => undefined,
    /** Placeholder: the session no longer needs the slot it asked for. */
    withdrawSlotRequest: () => undefined,
    /** Placeholder: take the free slot that `slotFree` saw (synchronously, same step). */
    takeSlot: () => undefined,
    /** Placeholder: give the slot back to the runtime. */
    releaseSlot: () => undefined,
    /** Placeholder: a run's actor failed (a bug); the runtime fails its handle. */
    reportRunError: (_, _params: RunErrorParams) => undefined,
  },
  guards: {
    /** Placeholder: whether the runtime has a run slot free right now (a pure query). */
    slotFree: () => true,
    hasRoom: ({ context }) => context.children.size < context.maxQueuedRuns,
    queueEmpty: ({ context }) => context.queue.size === 0,
    /** The run that ended is the only one waiting (it leaves, the line is then empty). */
    isLastQueued: ({ context, event }) =>
      context.queue.size === 1 && context.queue.has(endedRunId(context, event) ?? ''),
    isActiveRun: ({ context, event }) => endedRunId(context, event) === context.activeRunId,
    /** The active run ended and nobody waits: the session goes idle. */
    isActiveRunWithEmptyQueue: ({ context, event }) =>
      endedRunId(context, event) === context.activeRunId && context.queue.size === 0,
    /** The run that ended was one whose `interrupt` strategy waits for the active run. */
    isInterruptingRunEnded: ({ context, event }) =>
      context.interruptingRunIds.includes(endedRunId(context, event) ?? ''),
    /** The run that ended was the last one whose `interrupt` strategy waits for the active run. */
    isLastInterruptingRun: ({ context, event }) =>
      context.interruptingRunIds.length === 1 &&
      context.interruptingRunIds[0] === endedRunId(context, event),
    strategyIs: ({ event }, strategy: SessionStrategy) =>
      event.type === 'session.start' && event.strategy === strategy,
  },
  delays: {
    grace: ({ context }) => context.graceMs,
  },
});

type ActionArgs = { context: SessionMachineContext; event: SessionMachineEvent | RunEndEvent };
/** The child actor of the run that starts. */
const startedChild = ({ context, event }: ActionArgs) =>
  context.children.childOf(startOf(event).runId) ?? '';
/** The child actor of the active run. */
const activeChild = ({ context }: ActionArgs) =>
  context.children.childOf(context.activeRunId ?? '') ?? '';

const sessionSetup = base.extend({
  actions: {
    /**
     * `prepare()`: the run's actor, spawned in CREATED. An `assign`'s `spawn`, not
     * `enqueueActions` + `spawnChild` (whose `systemId` is fixed): one snapshot rebuilt and no
     * action queue made, 1.75 KB less garbage per run (bench/run-steps.bench.ts).
     */
    spawnRun: base.assign(({ context, event, spawn }) => {
      if (event.type !== 'session.prepare') return {};
      spawn('run', {
        id: context.children.take(event.run.runId),
        systemId: runSystemId(event.run.runId),
        input: event.run,
      });
      return {};
    }),
    /**
     * The run's end: it leaves the queue wherever it stood (its actor is stopped next). An assign
     * that changes nothing but the mutable tables, so a pure `transition()` applies it too.
     */
    forgetRun: base.assign(({ context, event }) => {
      const runId = context.children.release(endedChildId(event));
      if (runId !== undefined) context.queue.delete(runId);
      return {};
    }),
    /**
     * The active run's end: the slot is free, the run forgotten. Written in place (see
     * {@link SessionMachineContext.activeRunId}).
     */
    forgetActiveRun: ({ context, event }) => {
      context.children.release(endedChildId(event));
      const active = context as Mutable<SessionMachineContext>;
      active.activeRunId = undefined;
      if (active.interruptingRunIds.length > 0) active.interruptingRunIds = [];
    },
    stopEndedRun: base.stopChild(({ event }) => endedChildId(event)),
    reportError: base.enqueueActions(({ context, event, enqueue }) => {
      if (!('error' in event)) return;
      const params: RunErrorParams = {
        runId: context.children.runOf(event.actorId) ?? event.actorId,
        error: event.error,
      };
      enqueue({ type: 'reportRunError', params });
    }),
    admitStarted: base.sendTo(startedChild, ({ event }) => ({
      type: 'run.start' as const,
      at: startOf(event).at,
      verdict: 'admitted' as const,
    })),
    /** The run that starts is the active one (in place: see `SessionMachineContext.activeRunId`). */
    setActiveToStarted: ({ context, event }) => {
      (context as Mutable<SessionMachineContext>).activeRunId = startOf(event).runId;
    },
    addStartedToQueue: ({ context, event }) => {
      context.queue.add(startOf(event).runId);
    },
    /** `interrupt`: the newer run goes first in line, ahead of runs already waiting. */
    addStartedToQueueFront: ({ context, event }) => {
      context.queue.addFirst(startOf(event).runId);
    },
    tellQueued: base.sendTo(startedChild, ({ event }) => ({
      type: 'run.start' as const,
      at: startOf(event).at,
      verdict: 'queued' as const,
    })),
    rejectStarted: base.sendTo(startedChild, ({ event }) => ({
      type: 'run.start' as const,
      at: startOf(event).at,
      verdict: 'rejected' as const,
    })),
    admitHead: base.assign({ activeRunId: ({ context }) => context.queue.shift() }),
    admitActive: base.sendTo(activeChild, { type: 'run.admit' }),
    /** `interrupt`: the active run is asked to wrap up; it is cancelled after `graceMs`. */
    recordInterrupting: base.assign({
      graceMs: ({ event }) => startOf(event).graceMs,
      interruptingRunIds: ({ context, event }) => [
        ...context.interruptingRunIds,
        startOf(event).runId,
      ],
    }),
    interruptActive: base.sendTo(activeChild, {
      type: 'run.interrupt',
      message: 'interrupted by a newer run',
      cause: 'interrupt',
      initiator: 'strategy',
    }),
    /** The grace is spent: the runs that waited for it wait like any other now. */
    clearInterrupting: base.assign({ interruptingRunIds: [] }),
    /** A run that ended no longer waits for the active run (its interrupt is withdrawn). */
    forgetInterrupting: base.assign({
      interruptingRunIds: ({ context, event }) => {
        const runId = context.children.runOf(endedChildId(event));
        return context.interruptingRunIds.filter((id) => id !== runId);
      },
    }),
    /** The `interrupt` strategy's grace is over: the active run is cancelled. */
    cancelActiveAfterGrace: base.sendTo(
      activeChild,
      cancelEvent(
        CancelMode.Immediate,
        undefined,
        'cancel',
        'interrupted by a newer run; grace period over',
      ),
    ),
    /** `preempt`: every queued run is cancelled at once. */
    cancelQueued: base.enqueueActions(({ context, enqueue }) => {
      for (const runId of context.queue.toArray()) {
        enqueue.sendTo(
          context.children.childOf(runId) ?? '',
          cancelEvent(CancelMode.Immediate, undefined, 'preempt', 'preempted by a newer run'),
        );
      }
    }),
    /** `preempt`: the active run is cancelled at its next safe point, escalating after `graceMs`. */
    preemptActive: base.sendTo(activeChild, ({ event }) => {
      const { at, graceMs } = startOf(event);
      return cancelEvent(
        CancelMode.AnySafePoint,
        at + graceMs,
        'preempt',
        'preempted by a newer run',
      );
    }),
  },
});

/**
 * A run's end while a run holds the session's slot (`active` and `interrupting`): the active run's
 * end frees the slot (the session goes idle, or waits for a slot for the next run); any other
 * run's just leaves.
 */
const activeRunEnded = {
  'xstate.done.actor.*': [
    {
      guard: 'isActiveRunWithEmptyQueue',
      target: 'idle',
      actions: ['forgetActiveRun', 'releaseSlot', 'stopEndedRun'],
    },
    {
      guard: 'isActiveRun',
      target: 'waiting',
      actions: ['forgetActiveRun', 'releaseSlot', 'stopEndedRun'],
    },
    { actions: ['forgetRun', 'stopEndedRun'] },
  ],
  'xstate.error.actor.*': [
    {
      guard: 'isActiveRunWithEmptyQueue',
      target: 'idle',
      actions: ['reportError', 'forgetActiveRun', 'releaseSlot', 'stopEndedRun'],
    },
    {
      guard: 'isActiveRun',
      target: 'waiting',
      actions: ['reportError', 'forgetActiveRun', 'releaseSlot', 'stopEndedRun'],
    },
    { actions: ['reportError', 'forgetRun', 'stopEndedRun'] },
  ],
} as const;

/** The session machine definition; bind its actors and actions with `sessionMachine.provide(...)`. */
export const sessionMachine = sessionSetup.createMachine({
  id: 'session',
  initial: 'idle',
  context: ({ input }) => ({
    ownerId: input.ownerId,
    sessionId: input.sessionId,
    maxQueuedRuns: input.maxQueuedRuns,
    queue: new RunQueue(),
    children: new ChildIds(),
    activeRunId: undefined,
    graceMs: 0,
    interruptingRunIds: [],
  }),
  on: {
    'session.prepare': { guard: 'hasRoom', actions: 'spawnRun' },
    // A run that never became active (prepared, or queued) ended: it just leaves.
    'xstate.done.actor.*': { actions: ['forgetRun', 'stopEndedRun'] },
    'xstate.error.actor.*': { actions: ['reportError', 'forgetRun', 'stopEndedRun'] },
  },
  states: {
    idle: {
      on: {
        'session.start': [
          {
            // The common case: a free slot, so the run is admitted in this very step.
            guard: 'slotFree',
            target: 'active',
            actions: ['takeSlot', 'setActiveToStarted', 'admitStarted'],
          },
          { target: 'waiting', actions: ['addStartedToQueue', 'tellQueued'] },
        ],
      },
    },
    // `interrupting` and `active` are siblings, not children of one `active` parent: every state
    // node entered costs each snapshot of the step (the admission and the end of every run): 4.3
    // KB of garbage per run, measured by heap sampling. A run's end has the same transitions in
    // both (`activeRunEnded`), after `interrupting`'s own. (The states' order is the one whose
    // diagram, visualizations/session.mmd, lays out with no label over another.)
    interrupting: {
      after: {
        grace: { target: 'active', actions: ['cancelActiveAfterGrace', 'clearInterrupting'] },
      },
      on: {
        // The last newer run that waited ended: nothing asks for the active run's end.
        // (Another one still waiting keeps the grace going.) Any other run's end: as in `active`.
        'xstate.done.actor.*': [
          {
            guard: 'isLastInterruptingRun',
            target: 'active',
            actions: ['forgetInterrupting', 'forgetRun', 'stopEndedRun'],
          },
          {
            guard: 'isInterruptingRunEnded',
            actions: ['forgetInterrupting', 'forgetRun', 'stopEndedRun'],
          },
          ...activeRunEnded['xstate.done.actor.*'],
        ],
        'xstate.error.actor.*': [
          {
            guard: 'isLastInterruptingRun',
            target: 'active',
            actions: ['reportError', 'forgetInterrupting', 'forgetRun', 'stopEndedRun'],
          },
          {
            guard: 'isInterruptingRunEnded',
            actions: ['reportError', 'forgetInterrupting', 'forgetRun', 'stopEndedRun'],
          },
          ...activeRunEnded['xstate.error.actor.*'],
        ],
        'session.start': [
          { guard: { type: 'strategyIs', params: 'reject' }, actions: 'rejectStarted' },
          {
            guard: { type: 'strategyIs', params: 'interrupt' },
            actions: ['addStartedToQueueFront', 'tellQueued', 'recordInterrupting'],
          },
          {
            guard: { type: 'strategyIs', params: 'preempt' },
            actions: ['cancelQueued', 'preemptActive', 'addStartedToQueue', 'tellQueued'],
          },
          { actions: ['addStartedToQueue', 'tellQueued'] },
        ],
      },
    },
    active: {
      on: {
        'session.start': [
          { guard: { type: 'strategyIs', params: 'reject' }, actions: 'rejectStarted' },
          {
            guard: { type: 'strategyIs', params: 'interrupt' },
            target: 'interrupting',
            actions: [
              'addStartedToQueueFront',
              'tellQueued',
              'recordInterrupting',
              'interruptActive',
            ],
          },
          {
            guard: { type: 'strategyIs', params: 'preempt' },
            actions: ['cancelQueued', 'preemptActive', 'addStartedToQueue', 'tellQueued'],
          },
          { actions: ['addStartedToQueue', 'tellQueued'] },
        ],
        ...activeRunEnded,
      },
    },
    waiting: {
      entry: 'requestSlot',
      on: {
        'session.start': [
          { guard: { type: 'strategyIs', params: 'reject' }, actions: 'rejectStarted' },
          {
            guard: { type: 'strategyIs', params: 'interrupt' },
            actions: ['addStartedToQueueFront', 'tellQueued'],
          },
          {
            guard: { type: 'strategyIs', params: 'preempt' },
            actions: ['cancelQueued', 'addStartedToQueue', 'tellQueued'],
          },
          { actions: ['addStartedToQueue', 'tellQueued'] },
        ],
        'session.slot_granted': [
          { guard: 'queueEmpty', target: 'idle', actions: 'releaseSlot' },
          { target: 'active', actions: ['admitHead', 'admitActive'] },
        ],
        'xstate.done.actor.*': [
          {
            guard: 'isLastQueued',
            target: 'idle',
            actions: ['forgetRun', 'stopEndedRun', 'withdrawSlotRequest'],
          },
          { actions: ['forgetRun', 'stopEndedRun'] },
        ],
        'xstate.error.actor.*': [
          {
            guard: 'isLastQueued',
            target: 'idle',
            actions: ['reportError', 'forgetRun', 'stopEndedRun', 'withdrawSlotRequest'],
          },
          { actions: ['reportError', 'forgetRun', 'stopEndedRun'] },
        ],
      },
    },
  },
});
