/**
 * The sender's side of the command Stream (docs/architecture.md, "Cluster on Redis"): the
 * commands this instance sent to other holders, each waiting for its answer.
 *
 * An answer is read (and deleted) from Redis when its nudge arrives, and, as the backstop of a
 * lost nudge, by a poll every `answerPollMs` that reads every awaited answer and the lease of
 * its session in one round trip. A poll that finds a session nobody holds calls `onUnheld`,
 * which takes the lease: the new holder then applies the Stream past the applied cursor, this
 * command included. Each wait ends at `commandTimeoutMs` with `COMMAND_TIMEOUT`.
 *
 * @module
 * @internal
 */
import { CommandTimeoutError, ShuttingDownError } from '../errors.js';
import { toSessionKeyString, type SessionKey } from '../events/event-log.js';
import type { ResolvedClusterSessionAccessOptions } from './cluster-access-options.js';
import { traceCommand } from './command-trace.js';

/** @internal The commands this instance waits on. */
export interface CommandWaiters {
  /**
   * Waits for the answer of `requestId`, a command of `key`'s session; register before the
   * command is appended, so that no answer comes before its waiter.
   *
   * @returns the answer's JSON
   * @throws {@link CommandTimeoutError} (`COMMAND_TIMEOUT`) after `commandTimeoutMs`;
   *   `ShuttingDownError` (`SHUTTING_DOWN`) when closed first
   */
  wait(key: SessionKey, requestId: string): Promise<string>;
  /** Stops waiting for `requestId` (its command was never appended), rejecting with `error`. */
  abandon(requestId: string, error: unknown): void;
  /**
   * Reads the answer of `requestId` now, if this instance waits for it (a nudge arrived); with
   * `json`, the answer the nudge carried, which settles the wait at once (the stored copy is
   * deleted unread).
   */
  fetch(requestId: string, json?: string): void;
  /** Whether this instance waits for `requestId`. */
  has(requestId: string): boolean;
  /** Rejects every wait with `ShuttingDownError` and stops the poll. */
  close(): void;
}

interface Waiter {
  readonly key: SessionKey;
  readonly answerKey: string;
  readonly lease: string;
  readonly resolve: (json: string) => void;
  readonly reject: (error: unknown) => void;
  readonly timer: unknown;
}

/**
 * @internal Creates the waiters of one instance.
 *
 * @param onUnheld - a poll found nobody holding the session of a waiting command
 * @param onHeldHere - a poll found this instance holding it (its holder side applies the Stream)
 */
export function createCommandWaiters(
  options: ResolvedClusterSessionAccessOptions,
  onUnheld: (key: SessionKey) => void,
  onHeldHere: (key: SessionKey) => void,
): CommandWaiters {
  const { cluster, commandTimeoutMs, answerPollMs } = options;
  const { redis, clock } = cluster;
  const waiters = new Map<string, Waiter>();
  let pollTimer: unknown;
  let closed = false;

  const settle = (requestId: string, json: string) => {
    const waiter = waiters.get(requestId);
    if (waiter === undefined) return;
    waiters.delete(requestId);
    clock.clearTimeout(waiter.timer);
    traceCommand(requestId, 'b.answer_read');
    waiter.resolve(json);
  };

  const fetch = (requestId: string, json?: string) => {
    const waiter = waiters.get(requestId);
    if (waiter === undefined) return;
    if (json !== undefined) {
      settle(requestId, json);
      redis.del(waiter.answerKey).catch(() => undefined); // else it expires (`answerTtlMs`)
      return;
    }
    redis.getdel(waiter.answerKey).then(
      (json) => {
        if (json !== null) settle(requestId, json);
      },
      () => undefined, // the poll tries again
    );
  };

  /** One round trip: each awaited answer, and the lease of its session. */
  const poll = async () => {
    const round = [...waiters];
    if (round.length === 0) return;
    const pipeline = redis.pipeline();
    for (const [, waiter] of round) pipeline.getdel(waiter.answerKey).get(waiter.lease);
    const results = await pipeline.exec().catch(() => null);
    if (results === null) return;
    const unheld = new Map<string, SessionKey>();
    round.forEach(([requestId, waiter], i) => {
      const [answerError, json] = results[2 * i] ?? [null, null];
      const [leaseError, lease] = results[2 * i + 1] ?? [null, null];
      if (answerError === null && typeof json === 'string') settle(requestId, json);
      else if (leaseError !== null) return;
      else if (lease === null) unheld.set(toSessionKeyString(waiter.key), waiter.key);
      else if (cluster.fenceOf(waiter.key) !== undefined) onHeldHere(waiter.key);
    });
    for (const key of unheld.values()) onUnheld(key);
  };

  const armPoll = () => {
    if (pollTimer !== undefined || closed || waiters.size === 0) return;
    pollTimer = clock.setTimeout(() => {
      void poll().finally(() => {
        pollTimer = undefined;
        armPoll();
      });
    }, answerPollMs);
  };

  return {
    wait(key, requestId) {
      if (closed) return Promise.reject(new ShuttingDownError());
      const keys = cluster.keysOf(key);
      return new Promise<string>((resolve, reject) => {
        const timer = clock.setTimeout(() => {
          if (waiters.get(requestId)?.timer !== timer) return;
          waiters.delete(requestId);
          reject(new CommandTimeoutError(key.ownerId, key.sessionId, requestId, commandTimeoutMs));
        }, commandTimeoutMs);
        waiters.set(requestId, {
          key,
          answerKey: keys.answer(requestId),
          lease: keys.lease,
          resolve,
          reject,
          timer,
        });
        armPoll();
      });
    },

    abandon(requestId, error) {
      const waiter = waiters.get(requestId);
      if (waiter === undefined) return;
      waiters.delete(requestId);
      clock.clearTimeout(waiter.timer);
      waiter.reject(error);
    },

    fetch,

    has: (requestId) => waiters.has(requestId),

    close() {
      closed = true;
      if (pollTimer !== undefined) clock.clearTimeout(pollTimer);
      pollTimer = undefined;
      for (const requestId of [...waiters.keys()]) {
        this.abandon(requestId, new ShuttingDownError());
      }
    },
  };
}
