/**
 * The runtime machine: accepting work, then a graceful shutdown (docs/architecture.md, "Event log and HTTP service", "graceful
 * shutdown"): refuse new runs, cancel the waiting ones, interrupt the running ones, wait
 * `graceMs`, cancel what is left, and report whether everything drained on its own.
 *
 * @remarks
 * Pure: the runtime provides the actions that reach its runs and sessions, and tells the
 * machine `runtime.all_settled` once no live run is left. The grace period is an `after`
 * delay on the actor's clock (a runtime is never restored from a snapshot).
 *
 * @module
 */
import { assign, setup } from 'xstate';

/** What the runtime machine remembers. */
export interface RuntimeMachineContext {
  /** Grace given to running runs before they are cancelled, in ms. */
  readonly graceMs: number;
  /** True until a run had to be cancelled after the grace, or was abandoned. */
  readonly drained: boolean;
}

/** Events the runtime machine accepts. */
export type RuntimeMachineEvent =
  | { type: 'runtime.shutdown'; graceMs: number }
  | { type: 'runtime.all_settled'; abandoned: boolean };

/** The result of a shutdown, the machine's output. */
export interface RuntimeMachineOutput {
  readonly drained: boolean;
}

/** The runtime machine definition; bind its actions with `runtimeMachine.provide(...)`. */
export const runtimeMachine = setup({
  types: {
    context: {} as RuntimeMachineContext,
    events: {} as RuntimeMachineEvent,
    output: {} as RuntimeMachineOutput,
  },
  actions: {
    /** Placeholder: cancel every CREATED and QUEUED run (cause `shutdown`). */
    cancelWaitingRuns: () => undefined,
    /** Placeholder: interrupt every RUNNING run. */
    interruptRunningRuns: () => undefined,
    /** Placeholder: cancel every run still live (cause `shutdown`). */
    cancelRemainingRuns: () => undefined,
    /** Placeholder: send `runtime.all_settled` now if no live run is left. */
    checkSettled: () => undefined,
    /** Placeholder: stop every session actor and timer. */
    stopSessions: () => undefined,
  },
  delays: {
    grace: ({ context }) => context.graceMs,
  },
}).createMachine({
  id: 'runtime',
  initial: 'accepting',
  context: { graceMs: 0, drained: true },
  output: ({ context }) => ({ drained: context.drained }),
  states: {
    accepting: {
      on: {
        'runtime.shutdown': {
          target: 'draining',
          actions: assign({ graceMs: ({ event }) => event.graceMs }),
        },
      },
    },
    draining: {
      // Waiting runs first, so that nothing queued is admitted as running runs end.
      entry: ['cancelWaitingRuns', 'interruptRunningRuns', 'checkSettled'],
      after: { grace: 'forcing' },
      on: {
        // A repeated shutdown can only hurry: `graceMs: 0` cancels what is left at once.
        'runtime.shutdown': { guard: ({ event }) => event.graceMs === 0, target: 'forcing' },
        'runtime.all_settled': {
          target: 'stopped',
          actions: assign({ drained: ({ event }) => !event.abandoned }),
        },
      },
    },
    forcing: {
      entry: [assign({ drained: false }), 'cancelRemainingRuns', 'checkSettled'],
      on: { 'runtime.all_settled': 'stopped' },
    },
    stopped: { type: 'final', entry: 'stopSessions' },
  },
});
