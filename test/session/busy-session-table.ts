/**
 * The busy-session rule as one table (README "The controls"; the session machine decides it,
 * machines/session.machine.ts): for each state a session can be in when a run `n` starts, and
 * each strategy, what happens to the new run, to the queue and to the active run `a` and the
 * queued run `q`. The same rows run against one runtime (`busy-session-rules.test.ts`) and
 * against a cluster, the new run sent on another instance than the holder
 * (`test/cluster/busy-session-cluster.test.ts`): one rule, one specification.
 */
import type { SessionStrategy } from '../../src/index.js';

/** Where the session stands when the new run `n` starts. */
export type Before =
  | 'idle'
  /** `a` active, `q` queued behind it. */
  | 'active'
  /** `maxConcurrentRuns: 1` held by another session: `q` waits for a slot, nothing active. */
  | 'waiting for a slot';

export interface Row {
  readonly before: Before;
  readonly strategy: SessionStrategy;
  /** The new run's status right after `start()` (a refused one throws SESSION_BUSY). */
  readonly newRun: 'RUNNING' | 'QUEUED' | 'refused';
  /** The session's line afterwards, first in line first. */
  readonly queue: readonly string[];
  /** What happened to the active run `a`. */
  readonly active?: 'untouched' | 'interrupted' | 'cancelling at a safe point';
  /** What happened to the queued run `q`. */
  readonly queued?: 'waits' | 'cancelled (preempt)';
}

export const busySessionTable: readonly Row[] = [
  { before: 'idle', strategy: 'enqueue', newRun: 'RUNNING', queue: [] },
  { before: 'idle', strategy: 'reject', newRun: 'RUNNING', queue: [] },
  { before: 'idle', strategy: 'interrupt', newRun: 'RUNNING', queue: [] },
  { before: 'idle', strategy: 'preempt', newRun: 'RUNNING', queue: [] },
  // prettier-ignore
  { before: 'active', strategy: 'enqueue', newRun: 'QUEUED', queue: ['q', 'n'], active: 'untouched', queued: 'waits' },
  // prettier-ignore
  { before: 'active', strategy: 'reject', newRun: 'refused', queue: ['q'], active: 'untouched', queued: 'waits' },
  // prettier-ignore
  { before: 'active', strategy: 'interrupt', newRun: 'QUEUED', queue: ['n', 'q'], active: 'interrupted', queued: 'waits' },
  // prettier-ignore
  { before: 'active', strategy: 'preempt', newRun: 'QUEUED', queue: ['n'], active: 'cancelling at a safe point', queued: 'cancelled (preempt)' },
  // prettier-ignore
  { before: 'waiting for a slot', strategy: 'enqueue', newRun: 'QUEUED', queue: ['q', 'n'], queued: 'waits' },
  // prettier-ignore
  { before: 'waiting for a slot', strategy: 'reject', newRun: 'refused', queue: ['q'], queued: 'waits' },
  // The defect fixed with the actor tree: the README promises `interrupt` goes first, and it
  // used to go last while the session waited for a runtime slot.
  // prettier-ignore
  { before: 'waiting for a slot', strategy: 'interrupt', newRun: 'QUEUED', queue: ['n', 'q'], queued: 'waits' },
  // prettier-ignore
  { before: 'waiting for a slot', strategy: 'preempt', newRun: 'QUEUED', queue: ['n'], queued: 'cancelled (preempt)' },
];
