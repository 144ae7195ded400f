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
import type { AnyStateMachine } from 'xstate';
import type { ExecutorAbortParams, RunMachineContext } from './run.types.js';
import { logStatus, runSetup, runSystemId, toRunOutput } from './run.setup.js';

export { terminalRunStatuses, type RunStatus } from './run.types.js';
export { runSystemId };

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
