/**
 * The injected clock. Every timer runplane arms goes through one, so tests drive time with
 * XState's `SimulatedClock` (it satisfies this interface) and never sleep on the wall clock.
 *
 * @module
 */

/** A source of time and timers; XState's `SimulatedClock` is one. Times are milliseconds. */
export interface Clock {
  /** The current time in ms (any fixed origin). */
  now(): number;
  /** Calls `fn` after `timeoutMs`; returns a handle for {@link Clock.clearTimeout}. */
  setTimeout(fn: () => void, timeoutMs: number): unknown;
  /** Cancels a timer armed with {@link Clock.setTimeout}. */
  clearTimeout(handle: unknown): void;
}

/** The real clock: `Date.now()` and the platform timers. */
export const systemClock: Clock = {
  now: () => Date.now(),
  setTimeout: (fn, timeoutMs) => setTimeout(fn, timeoutMs),
  clearTimeout: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};

/**
 * Resolves after `ms` on `clock`, or rejects with the signal's reason when `signal` aborts.
 *
 * @param clock - the clock to wait on
 * @param ms - how long to wait, in ms
 * @param signal - optional; aborting it clears the timer and rejects
 */
export function sleep(clock: Clock, ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason as Error);
      return;
    }
    const onAbort = () => {
      clock.clearTimeout(handle);
      reject(signal?.reason as Error);
    };
    const handle = clock.setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
