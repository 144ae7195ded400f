/**
 * The machines `npm run viz` draws. Adding one is one entry here; `npm run viz` then writes its diagram and `npm run viz:check` keeps it fresh.
 *
 * @module
 */
import type { AnyStateMachine } from 'xstate';
import { runMachine } from '../../machines/run.machine.js';
import { runtimeMachine } from '../../machines/runtime.machine.js';
import { sessionMachine } from '../../machines/session.machine.js';
import { turnMachine } from '../../machines/turn.machine.js';
import { turnLoopMachine } from '../../machines/turn-loop.machine.js';

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
      'One execution of an agent: CREATED → QUEUED → RUNNING → COMPLETED | FAILED | CANCELLED, with safe-point cancels (cancelling, status RUNNING) and the unwinding of a cancelled agent.',
  },
  {
    name: 'session',
    machine: sessionMachine,
    source: 'machines/session.machine.ts',
    summary:
      'Admits the runs of one (ownerId, sessionId) one at a time, in start order, with the interrupt and preempt strategies for a busy session.',
  },
  {
    name: 'turn-loop',
    machine: turnLoopMachine,
    source: 'machines/turn-loop.machine.ts',
    summary:
      'The TurnLoop supervisor (after Eino ADK): pushed items become turns (one run each), with preemption, stop escalation (afterTurn → graceful → immediate) and checkpoints.',
  },
  {
    name: 'turn',
    machine: turnMachine,
    source: 'machines/turn.machine.ts',
    summary:
      'The turns of a TurnLoop, one after the other in one actor the loop invokes: each turn.begin goes planning → running → handling → ended, with who cancelled its run (preempt, stop, the handler) as a parallel region.',
  },
  {
    name: 'runtime',
    machine: runtimeMachine,
    source: 'machines/runtime.machine.ts',
    summary:
      'The runtime: accepting work, then a graceful shutdown that cancels waiting runs, interrupts running ones, waits graceMs, and cancels what is left.',
  },
];
