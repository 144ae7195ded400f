/**
 * The in-memory {@link Inbox}.
 *
 * @module
 */
import { toSessionKeyString } from '../events/event-log.js';
import type { Hint, Inbox } from './inbox.js';

const keyOf = toSessionKeyString;

/**
 * Creates an in-memory inbox: one array of hints per (ownerId, sessionId).
 *
 * @example
 * ```ts
 * const runtime = createRuntime({ stores: { inbox: createMemoryInbox() } });
 * ```
 */
export function createMemoryInbox(): Inbox {
  const queues = new Map<string, Hint[]>();
  return {
    push(_ctx, key, hint) {
      const k = keyOf(key);
      const queue = queues.get(k);
      if (queue === undefined) queues.set(k, [hint]);
      else queue.push(hint);
    },
    drain(_ctx, key) {
      const k = keyOf(key);
      const queue = queues.get(k) ?? [];
      queues.delete(k);
      return queue;
    },
    size(_ctx, key) {
      return queues.get(keyOf(key))?.length ?? 0;
    },
  };
}
