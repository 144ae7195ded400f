/**
 * What a sender remembers of the sessions other instances hold (docs/architecture.md, "Cluster
 * on Redis"): a command for a session seen held elsewhere a moment ago goes straight to the
 * session's command Stream, without first trying its lease (one round trip less on a
 * cross-instance cancel). Only a hint: the append script answers who holds the lease, and a
 * session nobody holds any more is then taken by the sender as before (`takeOver`), so a stale
 * hint costs time, never correctness.
 *
 * @module
 * @internal
 */
import type { Clock } from '../clock.js';
import { toSessionKeyString, type SessionKey } from '../events/event-log.js';

/** @internal The hints of one instance. */
export interface HolderHints {
  /** Another instance held `key`'s session just now. */
  note(key: SessionKey): void;
  /** Nobody, or this instance, holds it. */
  forget(key: SessionKey): void;
  /** Whether another instance held the session within the hint's lifetime. */
  isElsewhere(key: SessionKey): boolean;
}

/**
 * @internal Creates the hints of one instance.
 *
 * @param clock - the cluster's clock
 * @param lifetimeMs - how long a hint holds, in ms of `clock`
 * @param maxHints - how many sessions are remembered (the oldest hint goes first)
 */
export function createHolderHints(
  clock: Clock,
  lifetimeMs = 5_000,
  maxHints = 10_000,
): HolderHints {
  /** Session key string → the clock time the hint ends; in the order noted. */
  const hints = new Map<string, number>();
  return {
    note(key) {
      const k = toSessionKeyString(key);
      hints.delete(k);
      hints.set(k, clock.now() + lifetimeMs);
      if (hints.size > maxHints) hints.delete(hints.keys().next().value!);
    },
    forget: (key) => void hints.delete(toSessionKeyString(key)),
    isElsewhere(key) {
      const k = toSessionKeyString(key);
      const until = hints.get(k);
      if (until === undefined) return false;
      if (clock.now() < until) return true;
      hints.delete(k);
      return false;
    },
  };
}
