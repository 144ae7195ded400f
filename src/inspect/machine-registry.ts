/**
 * The machines `npm run viz` draws. Adding one (the TurnLoop and runtime machines when they land)
 * is one entry here; `npm run viz` then writes its diagram and `npm run viz:check` keeps it fresh.
 *
 * @module
 */
import type { AnyStateMachine } from 'xstate';
import { runMachine } from '../../machines/run.machine.js';
import { sessionMachine } from '../../machines/session.machine.js';

/** A machine drawn into `visualizations/`. */
export interface RegisteredMachine {
  /** File name stem: `visualizations/<name>.mmd`. */
  readonly name: string;
  readonly machine: AnyStateMachine;
  /** Where its definition lives, relative to the repository root. */
  readonly source: string;
  /** One sentence for the generated README. */
  readonly summary: string;
}

/** Every machine with a generated diagram, in the order the README shows them. */
export const registeredMachines: readonly RegisteredMachine[] = [
  {
    name: 'run',
    machine: runMachine,
    source: 'machines/run.machine.ts',
    summary:
      'One execution of an agent: CREATED → QUEUED → RUNNING → COMPLETED | FAILED | CANCELLED, with safe-point cancels (RUNNING.cancelling) and the unwinding of a cancelled agent.',
  },
  {
    name: 'session',
    machine: sessionMachine,
    source: 'machines/session.machine.ts',
    summary:
      'Admits the runs of one (ownerId, sessionId) one at a time, in start order, with the interrupt and preempt strategies for a busy session.',
  },
];
