/**
 * The session machine as a test model.
 *
 * - The queue is copied on write: the runtime's session machine mutates its `RunQueue` in place
 *   (O(1) per event over a 10,000-run queue), which a graph traversal cannot share between
 *   snapshots. Only the queue actions are replaced; guards, transitions and every other action
 *   are the machine's own.
 * - The environment's synchronous answers are composed in with `withReactions`: a cancelled
 *   queued run leaves the queue at once (`session.dequeue`), and with a free gate a slot request
 *   is granted at once (`session.slot_granted`).
 * - Two gates: `free` (no `maxConcurrentRuns`: the slot is always free) and `held` (a rival
 *   session always holds or waits for the only slot, so this session waits in `admitting` until
 *   the rival's run ends).
 */
import { assign } from 'xstate';
import type { ActorLogic, StateValue } from 'xstate';
import { RunQueue } from '../../machines/run-queue.js';
import {
  sessionMachine,
  type CancelRunsParams,
  type SessionMachineEvent,
  type SessionMachineInput,
} from '../../machines/session.machine.js';
import { getStatePaths, withReactions } from '../../src/testing/index.js';

export type SessionSnapshot = ReturnType<typeof sessionMachine.getInitialSnapshot>;
export type Gate = 'free' | 'held';

export const GRACE_MS = 100;
export const runNames = ['a', 'b', 'c'] as const;
const graceEvent = { type: 'xstate.after.grace.session.active.interrupting' } as const;

const copy = (queue: RunQueue, change: (next: RunQueue) => void): RunQueue => {
  const next = new RunQueue();
  for (const id of queue.toArray()) next.add(id);
  change(next);
  return next;
};

/** The session machine with copy-on-write queue actions and the gate's answer to `slotFree`. */
function sessionModelMachine(gate: Gate) {
  return sessionMachine.provide({
    guards: { slotFree: () => gate === 'free' },
    actions: {
      addToQueue: assign(({ context, event }) =>
        event.type === 'session.enqueue'
          ? { queue: copy(context.queue, (q) => q.add(event.runId)) }
          : {},
      ),
      addToQueueFront: assign(({ context, event }) =>
        event.type === 'session.enqueue'
          ? {
              queue: copy(new RunQueue(), (q) => {
                q.add(event.runId);
                for (const id of context.queue.toArray()) q.add(id);
              }),
            }
          : {},
      ),
      removeFromQueue: assign(({ context, event }) =>
        event.type === 'session.dequeue'
          ? { queue: copy(context.queue, (q) => q.delete(event.runId)) }
          : {},
      ),
      admitHead: assign(({ context }) => {
        const [head, ...rest] = context.queue.toArray();
        return {
          activeRunId: head,
          queue: copy(new RunQueue(), (q) => rest.forEach((id) => q.add(id))),
        };
      }),
    },
  });
}

/** The session machine composed with the runtime's synchronous answers. */
export function sessionModel(
  gate: Gate,
): ActorLogic<SessionSnapshot, SessionMachineEvent, SessionMachineInput> {
  return withReactions(sessionModelMachine(gate), (action, snapshot) => {
    if (action.type === 'requestSlot' && gate === 'free')
      return [{ type: 'session.slot_granted' as const }];
    if (action.type === 'cancelRuns') {
      // A cancelled queued run leaves the queue; a cancelled active run stays until it settles.
      const { runIds } = action.params as CancelRunsParams;
      return runIds
        .filter((runId) => snapshot.context.queue.has(runId))
        .map((runId) => ({ type: 'session.dequeue' as const, runId }));
    }
    return undefined;
  });
}

/** Every event of the session machine, over three run names. `reject` never reaches it. */
export const sessionEvents: readonly SessionMachineEvent[] = [
  ...runNames.flatMap((runId) =>
    (['enqueue', 'interrupt', 'preempt'] as const).map((strategy) => ({
      type: 'session.enqueue' as const,
      runId,
      strategy,
      graceMs: GRACE_MS,
    })),
  ),
  ...runNames.map((runId) => ({ type: 'session.dequeue' as const, runId })),
  ...runNames.map((runId) => ({ type: 'session.run_settled' as const, runId })),
  { type: 'session.slot_granted' },
  graceEvent as unknown as SessionMachineEvent,
];

export function describeSessionEvent(event: SessionMachineEvent): string {
  switch (event.type) {
    case 'session.enqueue':
      return `start ${event.runId}${event.strategy === 'enqueue' ? '' : ` (${event.strategy})`}`;
    case 'session.dequeue':
      return `cancel queued ${event.runId}`;
    case 'session.run_settled':
      return `${event.runId} settles`;
    case 'session.slot_granted':
      return 'slot granted';
    default:
      return 'grace over';
  }
}

const leaf = (value: StateValue): string => {
  const paths = getStatePaths(value);
  return paths.filter((p) => !paths.some((o) => o.startsWith(`${p}.`))).join('|');
};

export function describeSessionState(snapshot: SessionSnapshot): string {
  const { activeRunId, queue } = snapshot.context;
  const queued = queue.toArray();
  return `${leaf(snapshot.value)}[${activeRunId ?? '-'}|${queued.join(',')}]`;
}

export const serializeSessionState = (snapshot: SessionSnapshot): string =>
  JSON.stringify([
    snapshot.value,
    snapshot.context.activeRunId,
    snapshot.context.queue.toArray(),
    snapshot.context.interruptingRunId,
  ]);

/** What the runtime can produce: each name is started once at a time, settles only when active. */
export function sessionEventIsRealizable(
  gate: Gate,
  names: readonly string[],
): (snapshot: SessionSnapshot, event: SessionMachineEvent) => boolean {
  return (snapshot, event) => {
    const { activeRunId, queue } = snapshot.context;
    switch (event.type) {
      case 'session.enqueue':
        return (
          names.includes(event.runId) && activeRunId !== event.runId && !queue.has(event.runId)
        );
      case 'session.dequeue':
        return queue.has(event.runId);
      case 'session.run_settled':
        return activeRunId === event.runId;
      case 'session.slot_granted':
        return gate === 'held' && snapshot.matches('admitting');
      default:
        return snapshot.matches({ active: 'interrupting' });
    }
  };
}
