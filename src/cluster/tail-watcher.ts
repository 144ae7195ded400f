/**
 * Live follow without a connection per follower (docs/architecture.md, "Cluster on Redis"): one
 * subscriber connection per instance, subscribed to the tail channel of each session someone
 * follows here (ref-counted), and a slow poll of those sessions' `seq` as a backstop, since
 * pub/sub drops messages on a reconnect. A nudge or a poll that finds a newer `seq` wakes the
 * session's followers, which then read the Stream: they see only what Redis holds.
 *
 * @module
 * @internal
 */
import type { Redis } from 'ioredis';
import type { ResolvedClusterOptions } from './cluster-options.js';
import type { SessionKeys } from './keys.js';
import { sharedSubscription } from './redis-subscriber.js';

/** @internal One session's followers on this instance. */
export interface TailWatch {
  /** Grows each time the session is seen to have a newer `seq`. */
  readonly version: number;
  /** Resolves once subscribed (a follower reads only after it, so it misses no nudge). */
  readonly ready: Promise<void>;
  /** Resolves when `version` passes `seen` or `signal` aborts. */
  changed(seen: number, signal: AbortSignal | undefined): Promise<void>;
  /** Drops this follower's reference. */
  release(): void;
}

/** @internal The watches of one instance. */
export interface TailWatcher {
  watch(keys: SessionKeys): TailWatch;
  /** Wakes the followers of the session whose tail channel is `channel` when `seq` is news. */
  nudge(channel: string, seq: number): void;
  /** Ends the poll and the subscriber connection; followers stay asleep until aborted. */
  close(): Promise<void>;
}

interface WatchState {
  readonly keys: SessionKeys;
  refs: number;
  version: number;
  /** The highest `seq` seen for the session (-1: none yet). */
  seq: number;
  readonly waiters: Set<() => void>;
  /** The channel's SUBSCRIBE; a failed one is dropped, so the next follower tries again. */
  readonly subscribed: () => Promise<void>;
}

/** @internal Creates the tail watcher of an instance; the subscriber connection is made on first use. */
export function createTailWatcher(options: ResolvedClusterOptions): TailWatcher {
  const { redis, clock, followPollMs } = options;
  const watched = new Map<string, WatchState>();
  let subscriber: Redis | undefined;
  let pollTimer: unknown;
  let closed = false;

  const nudge = (channel: string, seq: number) => {
    const state = watched.get(channel);
    if (state === undefined || !(seq > state.seq)) return;
    state.seq = seq;
    state.version++;
    const waiters = [...state.waiters];
    state.waiters.clear();
    for (const wake of waiters) wake();
  };

  const connection = (): Redis => {
    if (subscriber === undefined) {
      subscriber = redis.duplicate();
      subscriber.on('message', (channel: string, message: string) =>
        nudge(channel, Number(message)),
      );
      subscriber.on('error', () => undefined); // it reconnects and resubscribes; the poll covers the gap
    }
    return subscriber;
  };

  /** One pipelined `GET seq` of every watched session. */
  const poll = async () => {
    const states = [...watched.values()];
    if (states.length === 0) return;
    const pipeline = redis.pipeline();
    for (const state of states) pipeline.get(state.keys.seq);
    const results = await pipeline.exec().catch(() => null);
    states.forEach((state, i) => {
      const [error, value] = results?.[i] ?? [null, null];
      if (error === null && typeof value === 'string') nudge(state.keys.tailChannel, Number(value));
    });
  };

  const armPoll = () => {
    if (pollTimer !== undefined || closed || watched.size === 0) return;
    pollTimer = clock.setTimeout(() => {
      void poll().finally(() => {
        pollTimer = undefined;
        armPoll();
      });
    }, followPollMs);
  };

  return {
    nudge,

    watch(keys) {
      const channel = keys.tailChannel;
      let state = watched.get(channel);
      if (state === undefined) {
        state = {
          keys,
          refs: 0,
          version: 0,
          seq: -1,
          waiters: new Set(),
          // Never mid-handshake: a second session followed while the connection is still
          // connecting (see subscribeAfterHandshake).
          subscribed: sharedSubscription(connection, channel),
        };
        watched.set(channel, state);
        armPoll();
      }
      state.refs++;
      const current = state;
      const ready = state.subscribed();
      let released = false;
      return {
        get version() {
          return current.version;
        },
        ready,
        changed(seen, signal) {
          if (current.version !== seen || signal?.aborted === true) return Promise.resolve();
          return new Promise<void>((resolve) => {
            const wake = () => {
              signal?.removeEventListener('abort', wake);
              current.waiters.delete(wake);
              resolve();
            };
            current.waiters.add(wake);
            signal?.addEventListener('abort', wake, { once: true });
          });
        },
        release() {
          if (released) return;
          released = true;
          if (--current.refs > 0 || watched.get(channel) !== current) return;
          watched.delete(channel);
          void subscriber?.unsubscribe(channel).catch(() => undefined);
        },
      };
    },

    async close() {
      closed = true;
      if (pollTimer !== undefined) clock.clearTimeout(pollTimer);
      pollTimer = undefined;
      const connection = subscriber;
      subscriber = undefined;
      if (connection !== undefined) await connection.quit().catch(() => connection.disconnect());
    },
  };
}
