/**
 * The run machine: one execution of an agent, `CREATED → QUEUED → RUNNING → COMPLETED | FAILED |
 * CANCELLED` (docs/architecture.md, "A run's life").
 *
 * @remarks
 * A run is a child actor of its session (or, for a nested run, of its parent run). Its
 * **status** (`context.status`) turns terminal at once; the actor reaches its final state
 * `settled`, with the {@link RunMachineOutput} as its output, only once its executor has
 * settled (returned, thrown, or been abandoned after `unwindTimeoutMs`) and every nested run
 * has reached its own final state. Its parent learns of that through
 * `xstate.done.actor.<runId>`. (An actor that reaches a final state stops at once, so the
 * terminal statuses cannot be final states themselves: they wait.)
 *
 * The machine is pure: it never touches a clock, a signal or an agent. The world reaches it
 * through pieces the runtime supplies with `machine.provide(...)`:
 * - `startExecutor` runs the agent, which answers with `agent.done` / `agent.error`;
 *   `abortExecutor` fires the run's AbortSignal; `signalInterrupt` its interrupt signal;
 * - `logStatus` writes a status change to the session's event log; `reportSettled` hands the
 *   outcome to the run's handle;
 * - `timer` sends its `event` back when the clock reaches the absolute time `at`.
 * Deadlines are absolute times in context, never `after` delays, so they survive a restore
 * (xstate #5331). The only relative delay is the unwind budget.
 *
 * A recursive cancel flows down to nested runs inside the chart (`cancelNestedRuns`), and a run
 * that turns terminal cancels its nested runs and waits for them before it settles.
 *
 * @module
 */
import { assign, fromCallback, setup } from 'xstate';
import type { AnyStateMachine, EventObject } from 'xstate';
import {
  CancelMode,
  isSafePointMatch,
  mergeCancelRequests,
  type CancelCause,
  type CancelRequest,
  type RunInitiator,
} from './cancel-request.js';
import { ChildIds } from './child-ids.js';
import { updateContext } from './context-update.js';
import type { TimerInput } from './clock-timer.js';
import type {
  ExecutorAbortParams,
  RunMachineContext,
  RunMachineEvent,
  RunMachineInput,
  RunMachineOutput,
  RunStatus,
  StatusChange,
} from './run.types.js';

export { terminalRunStatuses, type RunStatus } from './run.types.js';

/** A nested run's end, as its parent run receives it. */
type ChildEndEvent =
  | { type: `xstate.done.actor.${string}`; actorId: string; output: unknown }
  | { type: `xstate.error.actor.${string}`; actorId: string; error: unknown };

/** The `systemId` of run `runId`'s actor: `system.get(runSystemId(runId))` finds it. */
export const runSystemId = (runId: string): string => `run:${runId}`;

/**
 * The outcome a run settles with, from its context.
 *
 * @param context - a run's context in a terminal status
 * @returns the run's {@link RunMachineOutput}
 */
function toRunOutput(context: RunMachineContext): RunMachineOutput {
  if (context.status === 'COMPLETED') {
    return { status: 'COMPLETED', output: context.output, interrupted: context.interruptRequested };
  }
  if (context.status === 'FAILED') return { status: 'FAILED', error: context.error };
  return {
    status: 'CANCELLED',
    cause: context.cause ?? 'cancel',
    reason: context.cancel?.reason,
    escalated: context.escalated,
    unsettled: context.executor === 'abandoned',
  };
}

const cancelledBy = (
  cause: CancelCause,
  reason: string,
  initiator: RunInitiator,
): CancelRequest => ({
  mode: CancelMode.Immediate,
  deadlineAt: undefined,
  recursive: true,
  cause,
  reason,
  initiator,
});

/**
 * Sets the run's status fields without rebuilding its snapshot (see context-update.ts): the
 * status changes of every run, where `assign` cost 2.3 KB of garbage each.
 */
const updateRun = (
  update: (args: {
    context: RunMachineContext;
    event: RunMachineEvent | ChildEndEvent;
  }) => Partial<RunMachineContext>,
) => updateContext<RunMachineContext, RunMachineEvent | ChildEndEvent>(update);

const base = setup({
  types: {
    context: {} as RunMachineContext,
    events: {} as RunMachineEvent | ChildEndEvent,
    input: {} as RunMachineInput,
    output: {} as RunMachineOutput,
  },
  actors: {
    /** Placeholder: the runtime provides `fromClockTimer(clock)` (see clock-timer.ts). */
    timer: fromCallback<EventObject, TimerInput>(() => undefined),
    /**
     * A nested run: this very machine. The runtime provides its bound copy (see
     * {@link provideNestedRuns}).
     */
    nestedRun: fromCallback<EventObject, RunMachineInput>(() => undefined),
  },
  actions: {
    /** Placeholder: the runtime starts the agent of run `runId` (one microtask later). */
    startExecutor: (_, _runId: string) => undefined,
    /** Placeholder: the runtime fires the run's AbortSignal. */
    abortExecutor: (_, _params: ExecutorAbortParams) => undefined,
    /** Placeholder: the runtime fires the run's interrupt signal (`ctx.interruptSignal`). */
    signalInterrupt: () => undefined,
    /** Placeholder: the runtime logs a status change in the session's event log. */
    logStatus: (_, _change: StatusChange) => undefined,
    /** Placeholder: the runtime hands the settled outcome to the run's handle. */
    reportSettled: (_, _output: RunMachineOutput) => undefined,
    /** Placeholder: a nested run's actor failed (a bug); the runtime fails its handle. */
    reportRunError: (_, _params: { runId: string; error: unknown }) => undefined,
    /** Placeholder: the runtime logs that the executor was abandoned (`run.unsettled`). */
    logAbandoned: () => undefined,
    recordCancel: assign(({ context, event }) => {
      if (event.type !== 'run.cancel') return {};
      const cancel = mergeCancelRequests(context.cancel, event.request);
      if (cancel === context.cancel) return {};
      // A new, earlier escalation deadline gets a fresh timer id (see armEscalation).
      const rearm =
        cancel.deadlineAt !== undefined && cancel.deadlineAt !== context.cancel?.deadlineAt;
      return {
        cancel,
        timerSeq: rearm ? context.timerSeq + 1 : context.timerSeq,
      };
    }),
    /** Before RUNNING an interrupt is a cancel. */
    recordInterruptAsCancel: assign(({ context, event }) => ({
      cancel: mergeCancelRequests(
        context.cancel,
        cancelledBy(
          'cancel',
          'interrupted',
          event.type === 'run.interrupt' ? (event.initiator ?? 'user') : 'user',
        ),
      ),
    })),
    recordInterrupt: assign(({ event }) =>
      event.type === 'run.interrupt'
        ? {
            interruptRequested: true,
            interrupt: {
              message: event.message,
              cause: event.cause ?? 'interrupt',
              initiator: event.initiator ?? 'user',
            },
          }
        : {},
    ),
    recordRejection: assign({
      verdict: 'rejected' as const,
      cancel: cancelledBy('cancel', 'session busy', 'strategy'),
    }),
    recordTimeout: assign(({ context }) => ({
      cancel: context.cancel ?? cancelledBy('timeout', 'deadline reached', 'timeout'),
      cause: 'timeout' as const,
    })),
    recordEscalation: assign({ escalated: true }),
    /** Entering QUEUED. */
    enterQueued: updateRun(({ event }) => ({
      status: 'QUEUED' as const,
      verdict: event.type === 'run.start' ? event.verdict : undefined,
    })),
    /** Entering RUNNING: the executor starts (see `startExecutor`). */
    enterRunning: updateRun(() => ({ status: 'RUNNING' as const, executor: 'running' as const })),
    /** Entering COMPLETED on the agent's result. */
    enterCompleted: updateRun(({ event }) => ({
      status: 'COMPLETED' as const,
      output: event.type === 'agent.done' ? event.output : undefined,
      executor: 'settled' as const,
    })),
    /** Entering FAILED on the agent's error. */
    enterFailed: updateRun(({ event }) => ({
      status: 'FAILED' as const,
      error: event.type === 'agent.error' ? event.error : undefined,
      executor: 'settled' as const,
    })),
    /** Entering CANCELLED: a timeout that lands while a safe-point cancel is pending keeps its own cause. */
    enterCancelled: updateRun(({ context }) => ({
      status: 'CANCELLED' as const,
      cause: context.cause ?? context.cancel?.cause ?? 'cancel',
    })),
    markExecutorSettled: updateRun(() => ({ executor: 'settled' as const })),
    markExecutorAbandoned: updateRun(() => ({ executor: 'abandoned' as const })),
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
    hasNoBudget: ({ context }) => context.limits.timeoutMs === 0,
    hasDeadline: ({ context }) => context.limits.timeoutMs !== undefined,
    isRejected: ({ event }) => event.type === 'run.start' && event.verdict === 'rejected',
    isAdmitted: ({ event }) => event.type === 'run.start' && event.verdict === 'admitted',
    isAdmittedWithDeadline: ({ context, event }) =>
      event.type === 'run.start' &&
      event.verdict === 'admitted' &&
      context.limits.timeoutMs !== undefined,
    notYetInterrupted: ({ context }) => !context.interruptRequested,
    hasNestedRoom: ({ context }) => (context.nested?.size ?? 0) < context.limits.maxNestedRuns,
    noNestedRuns: ({ context }) => (context.nested?.size ?? 0) === 0,
    /** Placeholder: whether an `agent.error` is a cancellation (the runtime provides it). */
    isCancellationError: () => false,
  },
  delays: {
    unwindTimeout: ({ context }) => context.limits.unwindTimeoutMs,
  },
});

/**
 * Logs the status change into `to`, reading the status the run leaves: it comes before the
 * entry's assign. The error of a FAILED run comes from its event (not yet in context).
 */
const logStatus = (to: RunStatus, from?: RunStatus) => ({
  type: 'logStatus' as const,
  params: ({
    context,
    event,
  }: {
    context: RunMachineContext;
    event: { type: string };
  }): StatusChange => ({
    from: from ?? context.status,
    to,
    error: event.type === 'agent.error' ? (event as { error?: unknown }).error : undefined,
  }),
});

const runSetup = base.extend({
  actions: {
    reportNestedError: base.enqueueActions(({ context, event, enqueue }) => {
      if (event.type.startsWith('xstate.error.actor.') && 'actorId' in event && 'error' in event) {
        const runId = context.nested?.runOf(event.actorId) ?? event.actorId;
        enqueue({ type: 'reportRunError', params: { runId, error: event.error } });
      }
    }),
    recordDeadline: base.assign({
      deadlineAt: ({ context, event }) =>
        event.type === 'run.start' && context.limits.timeoutMs !== undefined
          ? event.at + context.limits.timeoutMs
          : context.deadlineAt,
    }),
    armDeadline: base.spawnChild('timer', {
      id: 'deadline',
      input: ({ context }) => ({ at: context.deadlineAt ?? 0, event: { type: 'run.deadline' } }),
    }),
    /** Arms a fresh escalation timer for the (new, earlier) merged deadline. */
    armEscalation: base.spawnChild('timer', {
      id: ({ context }) => `escalation-${context.timerSeq}`,
      input: ({ context }) => ({
        at: context.cancel?.deadlineAt ?? 0,
        event: { type: 'run.cancel_deadline' },
      }),
    }),
    /** A recursive cancel flows down to every nested run (inside the chart). */
    cancelNestedRuns: base.enqueueActions(({ context, enqueue }) => {
      const { cancel } = context;
      if (cancel?.recursive !== true) return;
      for (const childId of context.nested?.childIds() ?? [])
        enqueue.sendTo(childId, { type: 'run.cancel', request: cancel });
    }),
    /** A run that turned terminal cancels the nested runs still going. */
    endNestedRuns: base.enqueueActions(({ context, enqueue }) => {
      const request = cancelledBy('cancel', 'parent run ended', 'parent');
      for (const childId of context.nested?.childIds() ?? [])
        enqueue.sendTo(childId, { type: 'run.cancel', request });
    }),
    /** `ctx.spawn`: the nested run is this run's child, started (and admitted) at once. */
    spawnNestedRun: base.enqueueActions(({ context, event, enqueue }) => {
      if (event.type !== 'run.spawn' || context.nested === undefined) return;
      const childId = context.nested.take(event.runId);
      enqueue.spawnChild('nestedRun', {
        id: childId,
        systemId: runSystemId(event.runId),
        input: {
          runId: event.runId,
          ownerId: context.ownerId,
          sessionId: context.sessionId,
          parentRunId: context.runId,
          timeoutMs: event.timeoutMs,
          unwindTimeoutMs: context.limits.unwindTimeoutMs,
          maxNestedRuns: context.limits.maxNestedRuns,
        },
      });
      enqueue.sendTo(childId, { type: 'run.start', at: event.at, verdict: 'admitted' });
    }),
    /** The table of nested runs' child ids, made by the first spawn. */
    recordNestedRun: base.assign({ nested: ({ context }) => context.nested ?? new ChildIds() }),
    /** A nested run reached its final state (or failed): its child id is free again. */
    forgetNestedRun: base.assign(({ context, event }) => {
      if ('actorId' in event) context.nested?.release(event.actorId);
      return {};
    }),
    stopNestedRun: base.stopChild(({ event }) => ('actorId' in event ? event.actorId : '')),
  },
});

/** Fires the run's AbortSignal, with the cause and reason of the run's cancel (`abortExecutor`). */
const abortExecutor = {
  type: 'abortExecutor',
  params: ({ context }: { context: RunMachineContext }) => abortParams(context),
} as const;

/** What a RUNNING run does whether or not a safe-point cancel is pending (`RUNNING`, `cancelling`). */
const whileRunning = {
  'run.interrupt': {
    guard: 'notYetInterrupted',
    actions: ['recordInterrupt', 'signalInterrupt'],
  },
  'run.spawn': { guard: 'hasNestedRoom', actions: ['recordNestedRun', 'spawnNestedRun'] },
  // With no nested run to wait for, the run settles in the same step.
  'agent.done': [
    {
      guard: 'noNestedRuns',
      target: 'settled',
      actions: [logStatus('COMPLETED'), 'enterCompleted'],
    },
    { target: 'COMPLETED' },
  ],
  'agent.error': [
    {
      guard: 'noNestedRuns',
      target: 'settled',
      actions: [logStatus('FAILED'), 'enterFailed'],
    },
    { target: 'FAILED' },
  ],
  'run.deadline': {
    target: 'CANCELLED.unwinding',
    actions: ['recordTimeout', abortExecutor],
  },
} as const;

/**
 * The run machine definition. Bind it with {@link runMachine}`.provide({ actors, actions })`.
 *
 * @remarks Transition table: docs/architecture.md and the README's "The controls". The first
 * terminal status wins; terminal statuses ignore every command.
 */
export const runMachine = runSetup.createMachine({
  id: 'run',
  initial: 'CREATED',
  context: ({ input }) => ({
    runId: input.runId,
    ownerId: input.ownerId,
    sessionId: input.sessionId,
    parentRunId: input.parentRunId,
    limits: {
      timeoutMs: input.timeoutMs,
      unwindTimeoutMs: input.unwindTimeoutMs,
      maxNestedRuns: input.maxNestedRuns,
    },
    status: 'CREATED',
    deadlineAt: undefined,
    cancel: undefined,
    interruptRequested: false,
    interrupt: undefined,
    verdict: undefined,
    executor: 'idle',
    cause: undefined,
    escalated: false,
    output: undefined,
    error: undefined,
    nested: undefined,
    timerSeq: 0,
  }),
  output: ({ context }) => toRunOutput(context),
  on: {
    // Nested runs tell their parent run that they settled, in every state.
    'xstate.done.actor.*': { actions: ['forgetNestedRun', 'stopNestedRun'] },
    'xstate.error.actor.*': { actions: ['reportNestedError', 'forgetNestedRun', 'stopNestedRun'] },
  },
  states: {
    CREATED: {
      on: {
        'run.start': [
          // A zero budget is spent before the run could ever be admitted.
          { guard: 'hasNoBudget', target: 'CANCELLED.draining', actions: 'recordTimeout' },
          { guard: 'isRejected', target: 'CANCELLED.draining', actions: 'recordRejection' },
          // Started into a session with a free slot: admitted in the same step. It is logged as
          // passing QUEUED (`session.run_queued`), without a step of its own there.
          {
            guard: 'isAdmittedWithDeadline',
            target: 'RUNNING',
            actions: ['recordDeadline', 'armDeadline', logStatus('QUEUED')],
          },
          { guard: 'isAdmitted', target: 'RUNNING', actions: logStatus('QUEUED') },
          { guard: 'hasDeadline', target: 'QUEUED', actions: ['recordDeadline', 'armDeadline'] },
          { target: 'QUEUED' },
        ],
        'run.cancel': { target: 'CANCELLED.draining', actions: 'recordCancel' },
        'run.interrupt': { target: 'CANCELLED.draining', actions: 'recordInterruptAsCancel' },
      },
    },
    QUEUED: {
      entry: [logStatus('QUEUED'), 'enterQueued'],
      on: {
        'run.admit': { target: 'RUNNING' },
        'run.cancel': { target: 'CANCELLED.draining', actions: 'recordCancel' },
        'run.interrupt': { target: 'CANCELLED.draining', actions: 'recordInterruptAsCancel' },
        'run.deadline': { target: 'CANCELLED.draining', actions: 'recordTimeout' },
      },
    },
    RUNNING: {
      entry: [
        // Entered from QUEUED, or from CREATED by an admission logged as passing QUEUED.
        logStatus('RUNNING', 'QUEUED'),
        'enterRunning',
        { type: 'startExecutor', params: ({ context }) => context.runId },
      ],
      on: {
        ...whileRunning,
        'run.cancel': [
          {
            guard: 'isImmediate',
            target: 'CANCELLED.unwinding',
            actions: ['recordCancel', abortExecutor, 'cancelNestedRuns'],
          },
          {
            guard: 'movesDeadlineEarlier',
            target: 'cancelling',
            actions: ['recordCancel', 'armEscalation', 'cancelNestedRuns'],
          },
          { target: 'cancelling', actions: ['recordCancel', 'cancelNestedRuns'] },
        ],
      },
    },
    // Status RUNNING with a safe-point cancel pending: a sibling of RUNNING, not its child, as
    // every state node entered costs each snapshot of a step (4.7 KB of garbage per run, measured
    // by heap sampling). Its own transitions come first, then RUNNING's (`whileRunning`).
    cancelling: {
      on: {
        ...whileRunning,
        'run.cancel': [
          {
            guard: 'escalatesToImmediate',
            target: 'CANCELLED.unwinding',
            actions: ['recordCancel', 'recordEscalation', abortExecutor, 'cancelNestedRuns'],
          },
          {
            guard: 'movesDeadlineEarlier',
            actions: ['recordCancel', 'armEscalation', 'cancelNestedRuns'],
          },
          { guard: 'contributes', actions: ['recordCancel', 'cancelNestedRuns'] },
        ],
        'run.safe_point': { guard: 'matchesSafePoint', target: 'CANCELLED.unwinding' },
        'agent.error': [
          // The agent stopped on a cancellation (e.g. a nested run's, from this very cancel)
          // before reaching its safe point: the pending cancel is what ended it.
          {
            guard: 'isCancellationError',
            target: 'CANCELLED.draining',
            actions: 'markExecutorSettled',
          },
          ...whileRunning['agent.error'],
        ],
        'run.cancel_deadline': {
          target: 'CANCELLED.unwinding',
          actions: ['recordEscalation', abortExecutor],
        },
      },
    },
    COMPLETED: {
      entry: [logStatus('COMPLETED'), 'enterCompleted', 'endNestedRuns'],
      always: { guard: 'noNestedRuns', target: 'settled' },
    },
    FAILED: {
      entry: [logStatus('FAILED'), 'enterFailed', 'endNestedRuns'],
      always: { guard: 'noNestedRuns', target: 'settled' },
    },
    CANCELLED: {
      entry: [logStatus('CANCELLED'), 'enterCancelled', 'endNestedRuns'],
      // Entered at `unwinding` from RUNNING (the executor is still going), at `draining` when no
      // executor runs: never started, or it already threw the cancellation.
      initial: 'draining',
      states: {
        // The executor may still be going: wait for it, at most `unwindTimeoutMs`.
        // With no nested run to wait for, the run settles in the step its executor did (one
        // microstep less than passing `draining`: every cancelled run that was executing).
        unwinding: {
          on: {
            'agent.done': [
              { guard: 'noNestedRuns', target: '#run.settled', actions: 'markExecutorSettled' },
              { target: 'draining', actions: 'markExecutorSettled' },
            ],
            'agent.error': [
              { guard: 'noNestedRuns', target: '#run.settled', actions: 'markExecutorSettled' },
              { target: 'draining', actions: 'markExecutorSettled' },
            ],
          },
          after: {
            unwindTimeout: {
              target: 'draining',
              actions: ['markExecutorAbandoned', 'logAbandoned'],
            },
          },
        },
        // The nested runs, cancelled on entry, settle with their own unwind budgets.
        draining: {
          always: { guard: 'noNestedRuns', target: '#run.settled' },
        },
      },
    },
    settled: {
      type: 'final',
      entry: { type: 'reportSettled', params: ({ context }) => toRunOutput(context) },
    },
  },
});

function abortParams(context: RunMachineContext): ExecutorAbortParams {
  return {
    cause: context.cause ?? context.cancel?.cause ?? 'cancel',
    reason: context.cancel?.reason,
  };
}

/**
 * Makes `machine` (a provided {@link runMachine}) spawn itself for nested runs.
 *
 * @remarks A machine cannot name itself in its own `setup({ actors })`; this completes the
 * registration once the runtime has bound the machine, so nested runs get the same bindings.
 * @param machine - the bound run machine
 * @returns the same machine
 */
export function provideNestedRuns<TMachine extends AnyStateMachine>(machine: TMachine): TMachine {
  (machine.implementations.actors as Record<string, unknown>).nestedRun = machine;
  return machine;
}
