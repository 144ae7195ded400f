/**
 * The session machine: admits one run at a time, in start order (DESIGN.md §6).
 *
 * @remarks
 * Runs are not children of this actor: xstate #4990 makes a parent with thousands of children
 * quadratic (measured here: 2 ms per spawn at 10,000 children). The session knows its runs by
 * id and reaches them through actions the runtime provides:
 * - `slotFree` (guard) / `takeSlot`: admit at once when the runtime-wide gate
 *   (`maxConcurrentRuns`) has a free slot;
 * - `requestSlot` / `withdrawSlotRequest` / `releaseSlot`: otherwise wait in the gate's line;
 *   the runtime answers a request with `session.slot_granted`;
 * - `admitRun`, `interruptRun`, `cancelRun`: commands to one run.
 *
 * The slot is released only on `session.run_settled`, which the runtime sends once the active
 * run's executor has settled or been abandoned; a terminal status alone never frees it.
 *
 * Busy-session strategies (the AgentScope multitask strategies): `enqueue` waits in line;
 * `interrupt` puts the new run first in line, interrupts the active run, waits `graceMs`, then
 * cancels it (unless the new run was cancelled meanwhile); `preempt` cancels
 * every queued run and cancels the active one at its next safe point (escalating after
 * `graceMs`). `reject` is decided by the runtime before a run ever reaches the session.
 *
 * @module
 */
import { and, assign, setup } from 'xstate';
import { CancelMode, type CancelCause, type CancelModeValue } from './cancel-request.js';
import { RunQueue } from './run-queue.js';

/** How a run that arrives while the session is busy is handled. */
export type SessionStrategy = 'enqueue' | 'reject' | 'interrupt' | 'preempt';

/** Identifies the session. */
export interface SessionMachineInput {
  readonly ownerId: string;
  readonly sessionId: string;
}

/** What the session remembers. `queue` is mutated in place (see {@link RunQueue}). */
export interface SessionMachineContext {
  readonly ownerId: string;
  readonly sessionId: string;
  readonly queue: RunQueue;
  readonly activeRunId: string | undefined;
  /** Grace of the pending `interrupt` strategy, in ms. */
  readonly graceMs: number;
  /** The newer run whose `interrupt` strategy is interrupting the active one. */
  readonly interruptingRunId: string | undefined;
}

/** Events the session machine accepts. */
export type SessionMachineEvent =
  | {
      type: 'session.enqueue';
      runId: string;
      strategy: Exclude<SessionStrategy, 'reject'>;
      /** For `interrupt` and `preempt`: how long the active run gets before it is cancelled. */
      graceMs: number;
    }
  | { type: 'session.dequeue'; runId: string }
  | { type: 'session.slot_granted' }
  | { type: 'session.run_settled'; runId: string };

/** Parameters of the `cancelRuns` action. */
export interface CancelRunsParams {
  readonly runIds: readonly string[];
  readonly mode: CancelModeValue;
  readonly timeoutMs: number | undefined;
  readonly cause: CancelCause;
  /** A short human reason for the runs' outcomes. */
  readonly reason: string;
}

/** `preempt`: every queued run is cancelled at once. */
const cancelQueued = {
  type: 'cancelRuns',
  params: ({ context }: { context: SessionMachineContext }): CancelRunsParams => ({
    runIds: context.queue.toArray(),
    mode: CancelMode.Immediate,
    timeoutMs: undefined,
    cause: 'preempt',
    reason: 'preempted by a newer run',
  }),
} as const;

/** `preempt`: the active run is cancelled at its next safe point, escalating after `graceMs`. */
const preemptActive = {
  type: 'cancelRuns',
  params: ({
    context,
    event,
  }: {
    context: SessionMachineContext;
    event: SessionMachineEvent;
  }): CancelRunsParams => ({
    runIds: context.activeRunId === undefined ? [] : [context.activeRunId],
    mode: CancelMode.AnySafePoint,
    timeoutMs: event.type === 'session.enqueue' ? event.graceMs : undefined,
    cause: 'preempt',
    reason: 'preempted by a newer run',
  }),
} as const;

/** The session machine definition; bind its actions with `sessionMachine.provide(...)`. */
export const sessionMachine = setup({
  types: {
    context: {} as SessionMachineContext,
    events: {} as SessionMachineEvent,
    input: {} as SessionMachineInput,
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
    /** Placeholder: move run `runId` from QUEUED to RUNNING. */
    admitRun: (_, _runId: string) => undefined,
    /** Placeholder: interrupt run `runId` cooperatively. */
    interruptRun: (_, _runId: string) => undefined,
    /** Placeholder: cancel each of `runIds`. */
    cancelRuns: (_, _params: CancelRunsParams) => undefined,
    addToQueue: ({ context, event }) => {
      if (event.type === 'session.enqueue') context.queue.add(event.runId);
    },
    /** `interrupt`: the newer run goes first in line, ahead of runs already waiting. */
    addToQueueFront: ({ context, event }) => {
      if (event.type === 'session.enqueue') context.queue.addFirst(event.runId);
    },
    removeFromQueue: ({ context, event }) => {
      if (event.type === 'session.dequeue') context.queue.delete(event.runId);
    },
    admitHead: assign(({ context }) => ({ activeRunId: context.queue.shift() })),
    clearActive: assign({ activeRunId: undefined, interruptingRunId: undefined }),
  },
  guards: {
    /** Placeholder: whether the runtime has a run slot free right now (a pure query). */
    slotFree: () => true,
    queueEmpty: ({ context }) => context.queue.size === 0,
    isActiveRun: ({ context, event }) =>
      event.type === 'session.run_settled' && event.runId === context.activeRunId,
    strategyIs: ({ event }, strategy: SessionStrategy) =>
      event.type === 'session.enqueue' && event.strategy === strategy,
  },
  delays: {
    grace: ({ context }) => context.graceMs,
  },
}).createMachine({
  id: 'session',
  initial: 'idle',
  context: ({ input }) => ({
    ownerId: input.ownerId,
    sessionId: input.sessionId,
    queue: new RunQueue(),
    activeRunId: undefined,
    graceMs: 0,
    interruptingRunId: undefined,
  }),
  states: {
    idle: {
      on: {
        'session.enqueue': [
          {
            // The common case: a free slot, so the run is admitted in this very step.
            guard: 'slotFree',
            target: 'active',
            actions: [
              'takeSlot',
              assign({ activeRunId: ({ event }) => event.runId }),
              { type: 'admitRun', params: ({ event }) => event.runId },
            ],
          },
          { target: 'admitting', actions: 'addToQueue' },
        ],
      },
    },
    admitting: {
      entry: 'requestSlot',
      on: {
        'session.enqueue': [
          {
            guard: { type: 'strategyIs', params: 'preempt' },
            actions: [cancelQueued, 'addToQueue'],
          },
          { actions: 'addToQueue' },
        ],
        'session.dequeue': [
          {
            guard: ({ context, event }) =>
              context.queue.size === 1 && context.queue.has(event.runId),
            target: 'idle',
            actions: ['removeFromQueue', 'withdrawSlotRequest'],
          },
          { actions: 'removeFromQueue' },
        ],
        'session.slot_granted': [
          { guard: 'queueEmpty', target: 'idle', actions: 'releaseSlot' },
          {
            target: 'active',
            actions: [
              'admitHead',
              { type: 'admitRun', params: ({ context }) => context.activeRunId ?? '' },
            ],
          },
        ],
      },
    },
    active: {
      initial: 'running',
      on: {
        'session.dequeue': { actions: 'removeFromQueue' },
        'session.run_settled': [
          {
            guard: and(['isActiveRun', 'queueEmpty']),
            actions: ['clearActive', 'releaseSlot'],
            target: 'idle',
          },
          {
            guard: 'isActiveRun',
            actions: ['clearActive', 'releaseSlot'],
            target: 'admitting',
          },
        ],
      },
      states: {
        running: {
          on: {
            'session.enqueue': [
              {
                guard: { type: 'strategyIs', params: 'interrupt' },
                target: 'interrupting',
                actions: [
                  'addToQueueFront',
                  assign({
                    graceMs: ({ event }) => event.graceMs,
                    interruptingRunId: ({ event }) => event.runId,
                  }),
                  { type: 'interruptRun', params: ({ context }) => context.activeRunId ?? '' },
                ],
              },
              {
                guard: { type: 'strategyIs', params: 'preempt' },
                actions: [cancelQueued, preemptActive, 'addToQueue'],
              },
              { actions: 'addToQueue' },
            ],
          },
        },
        interrupting: {
          after: {
            grace: {
              target: 'running',
              actions: {
                type: 'cancelRuns',
                params: ({ context }) => ({
                  runIds: context.activeRunId === undefined ? [] : [context.activeRunId],
                  mode: CancelMode.Immediate,
                  timeoutMs: undefined,
                  cause: 'cancel' as const,
                  reason: 'interrupted by a newer run; grace period over',
                }),
              },
            },
          },
          on: {
            'session.enqueue': [
              {
                guard: { type: 'strategyIs', params: 'interrupt' },
                actions: [
                  'addToQueueFront',
                  assign({ interruptingRunId: ({ event }) => event.runId }),
                ],
              },
              {
                guard: { type: 'strategyIs', params: 'preempt' },
                actions: [cancelQueued, preemptActive, 'addToQueue'],
              },
              { actions: 'addToQueue' },
            ],
            // The newer run was cancelled while waiting: nothing asks for the active run's end.
            'session.dequeue': {
              guard: ({ context, event }) => event.runId === context.interruptingRunId,
              target: 'running',
              actions: ['removeFromQueue', assign({ interruptingRunId: undefined })],
            },
          },
        },
      },
    },
  },
});
