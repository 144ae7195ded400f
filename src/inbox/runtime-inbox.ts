/**
 * `runtime.inbox`: the producers' side of the session inbox.
 *
 * @module
 */
import { nanoid } from 'nanoid';
import { z } from 'zod';
import type { Clock } from '../clock.js';
import { nonEmptyString, parseOptions } from '../validation.js';
import type { Hint, Inbox, RuntimeInbox } from './inbox.js';

const pushSchema = z.object({
  ownerId: nonEmptyString,
  sessionId: nonEmptyString,
  hint: z.union(
    [nonEmptyString, z.object({ text: nonEmptyString, source: nonEmptyString.optional() })],
    { error: 'a non-empty string or { text, source? }' },
  ),
});

/** @internal Wraps an {@link Inbox} store into `runtime.inbox`. */
export function createRuntimeInbox(store: Inbox, clock: Clock): RuntimeInbox {
  return {
    push(ownerId, sessionId, hint) {
      const parsed = parseOptions(pushSchema, { ownerId, sessionId, hint }, 'hint');
      const stored: Hint = {
        id: nanoid(),
        text: typeof parsed.hint === 'string' ? parsed.hint : parsed.hint.text,
        source:
          typeof parsed.hint === 'string'
            ? 'user-supplement'
            : (parsed.hint.source ?? 'user-supplement'),
        at: clock.now(),
      };
      store.push({}, { ownerId, sessionId }, stored);
      return stored.id;
    },
    size(ownerId, sessionId) {
      return store.size({}, { ownerId, sessionId });
    },
  };
}
