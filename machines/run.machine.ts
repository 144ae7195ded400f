/**
 * The run machine: one execution of an agent, `CREATED → QUEUED → RUNNING → COMPLETED | FAILED |
 * CANCELLED` (DESIGN.md §5).
 *
 * @remarks
 * The machine is pure: it never touches a clock, a signal or an agent. The world reaches it
 * through pieces the runtime supplies with `machine.provide(...)`:
 * - `startExecutor` runs the agent, which answers with `agent.done` / `agent.error`;
 *   `abortExecutor` fires the run's AbortSignal. (Actions rather than a child actor: spawning
 *   a callback actor per run cost about a fifth of the whole lifecycle.)
 * - `timer` sends its `event` back when the clock reaches the absolute time `at`;
 * - `propagateCancel` forwards a recursive cancel to nested runs.
 * Deadlines are absolute times in context, never `after` delays, so they survive a restore
 * (xstate #5331). The only relative delay is the unwind budget, which is re-armed whenever
 * a CANCELLED run starts unwinding.
 *
 * A run started into a session with a free slot is admitted in the same macrostep: `run.start`
 * carries `admitted: true`, and QUEUED raises `run.admit` on entry. It still passes QUEUED
 * (inspection shows both microsteps); it just never waits there.
 *
 * A terminal status is entered at once; the run is *settled* only when the executor has
 * returned or thrown (CANCELLED.unwinding → settled), or has been abandoned after
 * `unwindTimeoutMs` (→ abandoned). The session admits its next run only after that.
 *
 * @module
 */
import { assign, enqueueActions, fromCallback, raise, setup, spawnChild } from 'xstate';
import type { EventObject } from 'xstate';
import {
  CancelMode,
  isSafePointMatch,
  mergeCancelRequests,
  type CancelCause,
  type CancelRequest,
  type SafePointKind,
} from './cancel-request.js';
import type { TimerInput } from './clock-timer.js';

/** The six statuses of a run, as read from the top level of its snapshot. */
export type RunStatus = 'CREATED' | 'QUEUED' | 'RUNNING' | 'COMPLETED' | 'FAILED' | 'CANCELLED';

/** Statuses after which nothing changes any more. */
export const terminalRunStatuses: ReadonlySet<RunStatus> = new Set([
  'COMPLETED',
  'FAILED',
  'CANCELLED',
]);

/** What the runtime knows about a run when it creates its actor. */
export interface RunMachineInput {
  readonly runId: string;
  readonly ownerId: string;
  readonly sessionId: string;
  /** Total budget from `run.start` to a terminal status, queue time included (ms). */
  readonly timeoutMs?: number | undefined;
  /** How long a cancelled executor may take to settle before it is abandoned (ms). */
  readonly unwindTimeoutMs: number;
}

/** Everything the run machine remembers. */
export interface RunMachineContext {
  readonly runId: string;
  readonly ownerId: string;
  readonly sessionId: string;
  readonly timeoutMs: number | undefined;
  readonly unwindTimeoutMs: number;
  /** Absolute time (clock ms) of the total deadline, set by `run.start`. */
  readonly deadlineAt: number | undefined;
  /** The merge of every cancel request so far (pending while RUNNING.cancelling). */
  readonly cancel: CancelRequest | undefined;
  /** Counts the cancel requests that changed something; lets a caller tell `contributed`. */
  readonly cancelSeq: number;
  readonly interruptRequested: boolean;
  readonly interruptMessage: string | undefined;
  /**
   * The agent executor: `idle` (never started: a run cancelled before RUNNING has none),
   * `running`, or `settled` (it returned or threw).
   */
  readonly executor: 'idle' | 'running' | 'settled';
  /** Set on entering CANCELLED. */
  readonly cause: CancelCause | undefined;
  /** A safe-point cancel that hit its deadline, or an immediate cancel that overrode one. */
  readonly escalated: boolean;
  readonly output: unknown;
  readonly error: unknown;
  /** True once the executor was abandoned after `unwindTimeoutMs`. */
  readonly unsettled: boolean;
  /** Counts escalation timers, so each gets a fresh child id. */
  readonly timerSeq: number;
}

/** Events the run machine accepts. Times are absolute clock milliseconds. */
export type RunMachineEvent =
  /**
   * `admitted`: the session admits the run in the same step as its start (its slot was free),
   * so the run passes QUEUED and enters RUNNING in one macrostep.
   */
  | { type: 'run.start'; at: number; admitted?: boolean }
  | { type: 'run.admit' }
  | { type: 'run.cancel'; request: CancelRequest }
  | { type: 'run.interrupt'; message?: string | undefined }
  | { type: 'run.safe_point'; kind: SafePointKind }
  | { type: 'run.deadline' }
  | { type: 'run.cancel_deadline' }
  | { type: 'agent.done'; output: unknown }
  | { type: 'agent.error'; error: unknown };

/** Parameters of the `abortExecutor` action: why the run's AbortSignal fires. */
export interface ExecutorAbortParams {
  readonly cause: CancelCause;
  readonly reason: string | undefined;
}

/** Forwards the merged cancel to nested runs (the runtime does nothing unless it is recursive). */
const propagateCancel = {
  type: 'propagateCancel',
  params: ({ context }: { context: RunMachineContext }) => context.cancel,
} as const;

/** Fires the run's AbortSignal with the cause recorded so far. */
const abortExecutor = {
  type: 'abortExecutor',
  params: ({ context }: { context: RunMachineContext }): ExecutorAbortParams => ({
    cause: context.cause ?? context.cancel?.cause ?? 'cancel',
    reason: context.cancel?.reason,
  }),
} as const;

const cancelledBy = (cause: CancelCause, reason?: string): CancelRequest => ({
  mode: CancelMode.Immediate,
  deadlineAt: undefined,
  recursive: true,
  cause,
  reason,
});

/**
 * The run machine definition. Use {@link runMachine}`.provide({ actors, actions })` to bind it.
 *
 * @remarks Transition table: DESIGN.md §5. The first terminal state wins; terminal states ignore
 * every command.
 */
export const runMachine = setup({
  types: {
    context: {} as RunMachineContext,
    events: {} as RunMachineEvent,
    input: {} as RunMachineInput,
  },
  actors: {
    /** Placeholder: the runtime provides `fromClockTimer(clock)` (see clock-timer.ts). */
    timer: fromCallback<EventObject, TimerInput>(() => undefined),
  },
  actions: {
    /** Placeholder: the runtime starts the agent of run `runId`. */
    startExecutor: (_, _runId: string) => undefined,
    /** Placeholder: the runtime fires the run's AbortSignal. */
    abortExecutor: (_, _params: ExecutorAbortParams) => undefined,
    /**
     * Placeholder: the runtime forwards the merged cancel to the run's nested runs when it is
     * `recursive` (and does nothing otherwise).
     */
    propagateCancel: (_, _request: CancelRequest | undefined) => undefined,
    recordCancel: assign(({ context, event }) => {
      if (event.type !== 'run.cancel') return {};
      const cancel = mergeCancelRequests(context.cancel, event.request);
      if (cancel === context.cancel) return {};
      // A new, earlier escalation deadline gets a fresh timer id (see armEscalation).
      const rearm =
        cancel.deadlineAt !== undefined && cancel.deadlineAt !== context.cancel?.deadlineAt;
      return {
        cancel,
        cancelSeq: context.cancelSeq + 1,
        timerSeq: rearm ? context.timerSeq + 1 : context.timerSeq,
      };
    }),
    /**
     * The session's admission of a run started into a free slot. Named here, built once:
     * XState warns when `raise()` is created while a custom action runs, and the session's
     * `admitRun` action is what starts such a run.
     */
    raiseAdmit: raise({ type: 'run.admit' }),
    /** Before RUNNING an interrupt is a cancel (DESIGN.md §5). */
    recordInterruptAsCancel: assign(({ context }) => ({
      cancel: mergeCancelRequests(context.cancel, cancelledBy('cancel', 'interrupted')),
      cancelSeq: context.cancelSeq + 1,
    })),
    recordTimeout: assign(({ context }) => ({
      cancel: context.cancel ?? cancelledBy('timeout', 'deadline reached'),
      cause: 'timeout' as const,
    })),
    /** Arms a fresh escalation timer for the (new, earlier) merged deadline. */
    armEscalation: spawnChild('timer', {
      id: ({ context }) => `escalation-${context.timerSeq}`,
      input: ({ context }) => ({
        at: context.cancel?.deadlineAt ?? 0,
        event: { type: 'run.cancel_deadline' },
      }),
    }),
  },
  guards: {
    isImmediate: ({ event }) =>
      event.type === 'run.cancel' && event.request.mode === CancelMode.Immediate,
    contributes: ({ context, event }) =>
      event.type === 'run.cancel' &&
      mergeCancelRequests(context.cancel, event.request) !== context.cancel,
    escalatesToImmediate: ({ context, event }) =>
      event.type === 'run.cancel' &&
      mergeCancelRequests(context.cancel, event.request).mode === CancelMode.Immediate,
    movesDeadlineEarlier: ({ context, event }) =>
      event.type === 'run.cancel' &&
      event.request.deadlineAt !== undefined &&
      (context.cancel?.deadlineAt === undefined ||
        event.request.deadlineAt < context.cancel.deadlineAt),
    matchesSafePoint: ({ context, event }) =>
      event.type === 'run.safe_point' &&
      context.cancel !== undefined &&
      isSafePointMatch(context.cancel.mode, event.kind),
    hasDeadline: ({ context }) => context.timeoutMs !== undefined,
    hasNoBudget: ({ context }) => context.timeoutMs === 0,
    /** Placeholder: whether an `agent.error` is a cancellation (the runtime provides it). */
    isCancellationError: () => false,
  },
  delays: {
    unwindTimeout: ({ context }) => context.unwindTimeoutMs,
  },
}).createMachine({
  id: 'run',
  initial: 'CREATED',
  context: ({ input }) => ({
    runId: input.runId,
    ownerId: input.ownerId,
    sessionId: input.sessionId,
    timeoutMs: input.timeoutMs,
    unwindTimeoutMs: input.unwindTimeoutMs,
    deadlineAt: undefined,
    cancel: undefined,
    cancelSeq: 0,
    interruptRequested: false,
    interruptMessage: undefined,
    executor: 'idle',
    cause: undefined,
    escalated: false,
    output: undefined,
    error: undefined,
    unsettled: false,
    timerSeq: 0,
  }),
  states: {
    CREATED: {
      on: {
        'run.start': [
          // A zero budget is spent before the run could ever be admitted.
          { guard: 'hasNoBudget', target: 'CANCELLED.settled', actions: 'recordTimeout' },
          {
            guard: 'hasDeadline',
            target: 'QUEUED',
            actions: [
              assign({
                deadlineAt: ({ context, event }) => event.at + (context.timeoutMs ?? 0),
              }),
              spawnChild('timer', {
                id: 'deadline',
                input: ({ context }) => ({
                  at: context.deadlineAt ?? 0,
                  event: { type: 'run.deadline' },
                }),
              }),
            ],
          },
          { target: 'QUEUED' },
        ],
        'run.cancel': { target: 'CANCELLED.settled', actions: 'recordCancel' },
        'run.interrupt': { target: 'CANCELLED.settled', actions: 'recordInterruptAsCancel' },
      },
    },
    QUEUED: {
      // Started into a session with a free slot: the session's admission comes in the same
      // macrostep, so QUEUED is passed without a step of its own.
      entry: enqueueActions(({ event, enqueue }) => {
        if (event.type === 'run.start' && event.admitted === true) enqueue('raiseAdmit');
      }),
      on: {
        'run.admit': { target: 'RUNNING' },
        'run.cancel': { target: 'CANCELLED.settled', actions: 'recordCancel' },
        'run.interrupt': { target: 'CANCELLED.settled', actions: 'recordInterruptAsCancel' },
        'run.deadline': { target: 'CANCELLED.settled', actions: 'recordTimeout' },
      },
    },
    RUNNING: {
      initial: 'working',
      entry: [
        assign({ executor: 'running' }),
        { type: 'startExecutor', params: ({ context }) => context.runId },
      ],
      on: {
        'run.interrupt': {
          guard: ({ context }) => !context.interruptRequested,
          actions: assign({
            interruptRequested: true,
            interruptMessage: ({ event }) => event.message,
          }),
        },
        'agent.done': {
          target: 'COMPLETED',
          actions: assign({ output: ({ event }) => event.output }),
        },
        'agent.error': {
          target: 'FAILED',
          actions: assign({ error: ({ event }) => event.error }),
        },
        'run.deadline': {
          target: 'CANCELLED.unwinding',
          actions: ['recordTimeout', abortExecutor],
        },
      },
      states: {
        working: {
          on: {
            'run.cancel': [
              {
                guard: 'isImmediate',
                target: '#run.CANCELLED.unwinding',
                actions: ['recordCancel', abortExecutor, propagateCancel],
              },
              {
                guard: 'movesDeadlineEarlier',
                target: 'cancelling',
                actions: ['recordCancel', 'armEscalation', propagateCancel],
              },
              { target: 'cancelling', actions: ['recordCancel', propagateCancel] },
            ],
          },
        },
        cancelling: {
          on: {
            'run.cancel': [
              {
                guard: 'escalatesToImmediate',
                target: '#run.CANCELLED.unwinding',
                actions: [
                  'recordCancel',
                  assign({ escalated: true }),
                  abortExecutor,
                  propagateCancel,
                ],
              },
              {
                guard: 'movesDeadlineEarlier',
                actions: ['recordCancel', 'armEscalation', propagateCancel],
              },
              { guard: 'contributes', actions: ['recordCancel', propagateCancel] },
            ],
            'run.safe_point': { guard: 'matchesSafePoint', target: '#run.CANCELLED.unwinding' },
            // The agent stopped on a cancellation (e.g. a nested run's, from this very cancel)
            // before reaching its safe point: the pending cancel is what ended it.
            'agent.error': {
              guard: 'isCancellationError',
              target: '#run.CANCELLED.settled',
              actions: assign({ executor: 'settled' }),
            },
            'run.cancel_deadline': {
              target: '#run.CANCELLED.unwinding',
              actions: [assign({ escalated: true }), abortExecutor],
            },
          },
        },
      },
    },
    COMPLETED: {},
    FAILED: {},
    CANCELLED: {
      // A timeout that lands while a safe-point cancel is pending keeps its own cause.
      entry: assign({ cause: ({ context }) => context.cause ?? context.cancel?.cause ?? 'cancel' }),
      // Entered at `unwinding` from RUNNING (the executor is still going), at `settled` when
      // no executor runs: never started, or it already threw the cancellation.
      initial: 'settled',
      states: {
        unwinding: {
          on: { 'agent.done': 'settled', 'agent.error': 'settled' },
          after: {
            unwindTimeout: { target: 'abandoned', actions: assign({ unsettled: true }) },
          },
        },
        settled: { type: 'final' },
        abandoned: { type: 'final' },
      },
    },
  },
});
