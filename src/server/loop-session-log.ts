/**
 * A loop session's items as its event log tells them (docs/architecture.md, "Loop sessions"):
 * which messages were sent, which a finished turn answered, and which are still owed an answer.
 * This is what a restarted service rebuilds a loop from, after `kill -9` as after SIGTERM.
 * Pure: no I/O, no HTTP.
 *
 * @module
 */
import type { RunplaneEvent } from '../events/event-log.js';

/** One message of a loop session: a TurnLoop item. */
export interface LoopItem {
  /** `item_<nanoid>`, named in `user.message` and in the `session.run_started` of its turn. */
  readonly itemId: string;
  readonly text: string;
}

/** The event types {@link loopItemsOf} reads (ask the log for only these). */
export const loopLogTypes: readonly string[] = [
  'user.message',
  'session.run_started',
  'run.completed',
  'run.failed',
  'run.cancelled',
  'session.loop_stopped',
];

/** What a loop session's log says of its items. */
export interface LoopItemsState {
  /** Items no finished turn answered, in the order they were sent. */
  readonly pending: LoopItem[];
  /** Ids of items a finished turn answered: never offered to a turn again. */
  readonly done: Set<string>;
}

const idsOf = (value: unknown): string[] =>
  Array.isArray(value) ? value.filter((id): id is string => typeof id === 'string') : [];

/**
 * Reads a loop session's items from its log.
 *
 * @remarks An item is sent by its `user.message` (`item_id`); a turn consumes items by its
 * run's `session.run_started` (`item_ids`); the run's end answers them, except:
 * - a run marked crashed (`run.failed` with cause `crashed`, written by the recovery of a
 *   process that died mid-turn) or lost with its instance (cause `owner_lost`, written by a
 *   cluster's next lease holder): its items are owed again;
 * - a turn the loop's own stop cut (a graceful shutdown): `session.loop_stopped` names its
 *   items (`interrupted_item_ids`), owed again (the checkpoint resumes them).
 * A run still running when the log ends (its process died before recovery wrote the crash)
 * answered nothing either.
 *
 * @param events - the session's events in seq order (at least the {@link loopLogTypes})
 * @returns the pending items in send order and the ids already answered
 */
export function loopItemsOf(events: readonly RunplaneEvent[]): LoopItemsState {
  const sent: LoopItem[] = [];
  const done = new Set<string>();
  const turnItems = new Map<string, string[]>();
  for (const event of events) {
    const { payload } = event;
    switch (event.type) {
      case 'user.message':
        if (typeof payload.item_id === 'string' && typeof payload.text === 'string') {
          sent.push({ itemId: payload.item_id, text: payload.text });
        }
        break;
      case 'session.run_started':
        if (event.runId !== undefined && payload.item_ids !== undefined) {
          turnItems.set(event.runId, idsOf(payload.item_ids));
        }
        break;
      case 'run.completed':
      case 'run.failed':
      case 'run.cancelled': {
        const items = event.runId === undefined ? undefined : turnItems.get(event.runId);
        const crashed =
          event.type === 'run.failed' &&
          (payload.cause === 'crashed' || payload.cause === 'owner_lost');
        if (items !== undefined && !crashed) for (const id of items) done.add(id);
        break;
      }
      case 'session.loop_stopped':
        for (const id of idsOf(payload.interrupted_item_ids)) done.delete(id);
        break;
    }
  }
  return { pending: sent.filter((item) => !done.has(item.itemId)), done };
}
