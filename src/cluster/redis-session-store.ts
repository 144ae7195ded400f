/**
 * The session store of a cluster (docs/architecture.md, "Cluster on Redis"): each session's
 * conversation history is a List under the session's hash tag, one message JSON per element,
 * oldest first. The JSON is encoded by the holder and stored as is (no script re-encodes it).
 *
 * Writes are the lease holder's and go through the session's outbox: `append` queues one
 * `history.append` op (all its messages in one `RPUSH`, in one fenced batch: all or none) and
 * resolves once Redis acknowledged it; `clear` queues a `history.clear`. So a history write
 * reaches Redis in the order the holder made it among the session's events, never ahead of an
 * event logged before it; Redis refuses it (`STALE_FENCE`) once another instance took the lease.
 * `load` reads the List on any instance (on the holder, after its own queued writes).
 *
 * Histories live in Redis's memory, so both one append and a history's total are bounded in
 * bytes (`HISTORY_TOO_LARGE`, nothing written). The holder keeps each held session's byte count
 * (the meta field `history:bytes`, loaded with the lease), so the check costs no round trip.
 *
 * @module
 * @internal
 */
import { chatMessageSchema, type ChatMessage } from '../agent/messages.js';
import { HistoryTooLargeError, InvalidArgumentError, StaleFenceError } from '../errors.js';
import { toSessionKeyString, type SessionKey, type StoreContext } from '../events/event-log.js';
import { throwIfAborted } from '../stores/checkpoint-store.js';
import type { SessionStore } from '../stores/session-store.js';
import type { ClusterInstance } from './cluster-instance.js';
import { checkInteger } from './cluster-options.js';
import { recordStoreFailed } from './redis-run-records.js';

/** The meta field that counts a history's bytes (written by the batch script). */
const bytesField = 'history:bytes';

/** @internal Options of {@link createRedisSessionStore}. */
export interface RedisSessionStoreOptions {
  /**
   * The bytes (UTF-8 JSON of its messages) one `append` may carry; kept well under the outbox's
   * bound, which a larger write would pass and so stop the session. A positive integer.
   * @default 4194304 (4 MiB)
   */
  readonly maxAppendBytes?: number;
  /**
   * The bytes a session's history may hold in Redis; `clear` empties it. A positive integer.
   * @default 67108864 (64 MiB)
   */
  readonly maxHistoryBytes?: number;
}

/**
 * @internal Creates the cluster's {@link SessionStore} on `instance` (and adds its mirror, the
 * held sessions' byte counts, to it).
 *
 * @param instance - the cluster instance whose leases fence the writes
 * @param options - {@link RedisSessionStoreOptions}
 * @returns the store: `append` and `clear` reject with {@link StaleFenceError} (`STALE_FENCE`,
 *   reason `not_held` when this instance does not hold the session, `write_refused` when Redis
 *   has a newer fence), `append` with {@link HistoryTooLargeError} (`HISTORY_TOO_LARGE`) past a
 *   bound and with `InvalidArgumentError` (`INVALID_ARGUMENT`) for a message JSON cannot
 *   encode; `load` with `RunplaneError` (`STORE_FAILED`) when Redis fails or holds an element
 *   that is not a chat message
 * @throws `InvalidArgumentError` (`INVALID_ARGUMENT`) for a bad option
 */
export function createRedisSessionStore(
  instance: ClusterInstance,
  options: RedisSessionStoreOptions = {},
): SessionStore {
  const maxAppendBytes = checkInteger('maxAppendBytes', options.maxAppendBytes, 4 * 1024 ** 2, 1);
  const maxHistoryBytes = checkInteger(
    'maxHistoryBytes',
    options.maxHistoryBytes,
    64 * 1024 ** 2,
    1,
  );
  const { redis } = instance;
  /** The byte count of each held session's history. */
  const held = new Map<string, number>();

  instance.addMirror({
    async load(key, keys) {
      const bytes = await redis.hget(keys.meta, bytesField);
      held.set(toSessionKeyString(key), Number(bytes ?? 0));
    },
    forget: (key) => void held.delete(toSessionKeyString(key)),
  });

  const bytesOf = (key: SessionKey): number => {
    const bytes = held.get(toSessionKeyString(key));
    if (bytes === undefined) throw new StaleFenceError(key.ownerId, key.sessionId, 0, 'not_held');
    return bytes;
  };

  const encode = (messages: readonly ChatMessage[]): { json: string[]; bytes: number } => {
    if (!Array.isArray(messages)) {
      throw new InvalidArgumentError(
        'messages',
        `expected \`messages\` to be an array of chat messages, got ${typeof messages}`,
      );
    }
    const json: string[] = [];
    let bytes = 0;
    for (const [index, message] of messages.entries()) {
      let text: string | undefined;
      try {
        text = JSON.stringify(message);
      } catch (error) {
        throw new InvalidArgumentError(
          'messages',
          `expected message ${index} to be JSON, got a value that fails: ${String(error)}`,
        );
      }
      if (text === undefined) {
        throw new InvalidArgumentError(
          'messages',
          `expected message ${index} to be JSON, got ${typeof message}`,
        );
      }
      json.push(text);
      bytes += Buffer.byteLength(text, 'utf8');
    }
    return { json, bytes };
  };

  return {
    async load(ctx: StoreContext, key: SessionKey) {
      throwIfAborted(ctx);
      // The holder reads after its own queued writes; a session lost meanwhile is read as is.
      if (held.has(toSessionKeyString(key))) await instance.flushed(key).catch(() => undefined);
      let elements: string[];
      try {
        elements = await redis.lrange(instance.keysOf(key).history, 0, -1);
      } catch (error) {
        throw recordStoreFailed('session store load', (error as Error).message, error);
      }
      return elements.map((element, index) => {
        let value: unknown;
        try {
          value = JSON.parse(element);
        } catch (error) {
          throw recordStoreFailed('session store load', `message ${index + 1} is not JSON`, error);
        }
        const parsed = chatMessageSchema.safeParse(value);
        if (!parsed.success) {
          throw recordStoreFailed(
            'session store load',
            `message ${index + 1} is not a chat message`,
          );
        }
        return parsed.data;
      });
    },

    async append(ctx: StoreContext, key: SessionKey, messages: readonly ChatMessage[]) {
      throwIfAborted(ctx);
      const before = bytesOf(key);
      const { json, bytes } = encode(messages);
      if (json.length === 0) return;
      if (bytes > maxAppendBytes) {
        throw new HistoryTooLargeError(key.ownerId, key.sessionId, 'append', maxAppendBytes, bytes);
      }
      if (before + bytes > maxHistoryBytes) {
        throw new HistoryTooLargeError(
          key.ownerId,
          key.sessionId,
          'history',
          maxHistoryBytes,
          before + bytes,
        );
      }
      instance.write(key, { op: 'history.append', messages: json, bytes });
      held.set(toSessionKeyString(key), before + bytes);
      await instance.flushed(key);
    },

    async clear(ctx: StoreContext, key: SessionKey) {
      throwIfAborted(ctx);
      bytesOf(key);
      instance.write(key, { op: 'history.clear' });
      held.set(toSessionKeyString(key), 0);
      await instance.flushed(key);
    },
  };
}
