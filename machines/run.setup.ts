/**
 * The run machine's setup: its context and events, the actors, actions, guards and delays its
 * chart (`run.machine.ts`) names, and the helpers those share (docs/architecture.md, "A run's
 * life"). The runtime provides the world-facing actions (`startExecutor`, `abortExecutor`,
 * `logStatus`, `reportSettled`, …) with `machine.provide(...)`.
 *
 * @module
 */
import { assign, fromCallback, setup } from 'xstate';
import type { EventObject } from 'xstate';
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
export function toRunOutput(context: RunMachineContext): RunMachineOutput {
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
export const logStatus = (to: RunStatus, from?: RunStatus) => ({
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

export const runSetup = base.extend({
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
