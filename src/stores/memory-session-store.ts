/**
 * The in-memory {@link SessionStore}.
 *
 * @module
 */
import { toSessionKeyString } from '../events/event-log.js';
import type { ChatMessage } from '../agent/messages.js';
import type { SessionStore } from './session-store.js';

const keyOf = toSessionKeyString;

/**
 * Creates an in-memory session store. Messages are copied in and out, so a caller can never
 * change a stored history by mutating what it passed or got.
 *
 * @example
 * ```ts
 * const runtime = createRuntime({ stores: { sessionStore: createMemorySessionStore() } });
 * ```
 */
export function createMemorySessionStore(): SessionStore {
  const histories = new Map<string, ChatMessage[]>();
  return {
    load(_ctx, key) {
      return Promise.resolve(structuredClone(histories.get(keyOf(key)) ?? []));
    },
    append(_ctx, key, messages) {
      const copy = structuredClone([...messages]);
      const k = keyOf(key);
      const history = histories.get(k);
      if (history === undefined) histories.set(k, copy);
      else history.push(...copy);
      return Promise.resolve();
    },
    clear(_ctx, key) {
      histories.delete(keyOf(key));
      return Promise.resolve();
    },
  };
}
