/**
 * The inbox of a cluster (docs/architecture.md, "Cluster on Redis"): a session's waiting hints
 * are durable session state, so they live in its meta hash, one field per hint,
 * `inbox:<position, 16 digits>` = the hint's JSON, written by the holder only.
 *
 * The holder's {@link Inbox} is a synchronous mirror (a push is ordered against the drain of a
 * running step, as the contract asks): a push queues a `meta.set` of the hint's field, a drain
 * a `meta.del` of the fields it took, both in the session's outbox, shipped in order with its
 * events by the fenced batch script. The mirror is loaded when the lease is taken, so hints a
 * lost holder left wait for the next one.
 *
 * @module
 * @internal
 */
import type { Hint, Inbox } from '../inbox/inbox.js';
import { toSessionKeyString, type SessionKey } from '../events/event-log.js';
import { StaleFenceError } from '../errors.js';
import type { ClusterInstance } from './cluster-instance.js';
import { recordStoreFailed } from './redis-run-records.js';

const fieldPrefix = 'inbox:';
const positionDigits = 16;

/** The meta field of the hint at `position` (byte order is position order). */
const toField = (position: number) =>
  `${fieldPrefix}${String(position).padStart(positionDigits, '0')}`;

/** What the holder keeps of one session's inbox. */
interface SessionInbox {
  /** The waiting hints with their fields, oldest first. */
  readonly hints: Array<{ readonly field: string; readonly hint: Hint }>;
  /** The position the next push takes. */
  next: number;
}

/**
 * @internal Creates the holder's inbox on `instance` (and adds its mirror to it).
 *
 * @returns the {@link Inbox}: `push` and `drain` for a session not held here throw
 *   {@link StaleFenceError} (`STALE_FENCE`); `size` of such a session is 0. The mirror's load
 *   rejects with `RunplaneError` (`STORE_FAILED`) for a stored hint that is not JSON.
 */
export function createRedisInbox(instance: ClusterInstance): Inbox {
  const { redis } = instance;
  const sessions = new Map<string, SessionInbox>();

  instance.addMirror({
    async load(key, keys) {
      const meta = await redis.hgetall(keys.meta);
      const fields = Object.keys(meta)
        .filter((field) => field.startsWith(fieldPrefix))
        .sort();
      const hints = fields.map((field) => {
        try {
          return { field, hint: JSON.parse(meta[field]!) as Hint };
        } catch (error) {
          throw recordStoreFailed('inbox load', `hint ${field} is not JSON`, error);
        }
      });
      const last =
        fields.length === 0 ? 0 : Number(fields[fields.length - 1]!.slice(fieldPrefix.length));
      sessions.set(toSessionKeyString(key), { hints, next: last + 1 });
    },
    forget: (key) => void sessions.delete(toSessionKeyString(key)),
  });

  const held = (key: SessionKey): SessionInbox => {
    const inbox = sessions.get(toSessionKeyString(key));
    if (inbox === undefined) throw new StaleFenceError(key.ownerId, key.sessionId, 0, 'not_held');
    return inbox;
  };

  return {
    push(_ctx, key, hint) {
      const inbox = held(key);
      const field = toField(inbox.next);
      instance.write(key, { op: 'meta.set', fields: { [field]: JSON.stringify(hint) } });
      inbox.next++;
      inbox.hints.push({ field, hint });
    },
    drain(_ctx, key) {
      const inbox = held(key);
      if (inbox.hints.length === 0) return [];
      instance.write(key, { op: 'meta.del', fields: inbox.hints.map(({ field }) => field) });
      return inbox.hints.splice(0).map(({ hint }) => hint);
    },
    size: (_ctx, key) => sessions.get(toSessionKeyString(key))?.hints.length ?? 0,
  };
}
