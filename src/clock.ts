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

/** The longest delay a platform timer takes; longer ones fire after 1 ms (Node clamps them). */
const maxTimerMs = 2_147_483_647;

/** A timer longer than {@link maxTimerMs}, re-armed in steps until it is due. */
interface LongTimer {
  timer: ReturnType<typeof setTimeout>;
  unrefd: boolean;
}

const isLongTimer = (handle: unknown): handle is LongTimer =>
  typeof handle === 'object' && handle !== null && 'unrefd' in handle;

/**
 * The real clock: `Date.now()` and the platform timers, with delays beyond 2³¹−1 ms (about 24.8
 * days) split into steps instead of firing at once.
 */
export const systemClock: Clock = {
  now: () => Date.now(),
  setTimeout: (fn, timeoutMs) => {
    if (timeoutMs <= maxTimerMs) return setTimeout(fn, timeoutMs);
    const due = Date.now() + timeoutMs;
    const long: LongTimer = { timer: undefined as never, unrefd: false };
    const arm = (ms: number) => {
      long.timer = setTimeout(
        () => {
          const left = due - Date.now();
          if (left > 0) arm(left);
          else fn();
        },
        Math.min(ms, maxTimerMs),
      );
      if (long.unrefd) long.timer.unref();
    };
    arm(timeoutMs);
    return long;
  },
  clearTimeout: (handle) =>
    clearTimeout(isLongTimer(handle) ? handle.timer : (handle as ReturnType<typeof setTimeout>)),
};

/**
 * Lets the process exit while `handle` (from {@link systemClock}) is pending; a no-op for other
 * clocks' handles. Used for housekeeping timers such as idle-session eviction.
 */
export function unrefTimer(handle: unknown): void {
  if (isLongTimer(handle)) {
    handle.unrefd = true;
    handle.timer.unref();
  } else if (typeof (handle as { unref?: unknown } | null)?.unref === 'function') {
    (handle as { unref(): void }).unref();
  }
}

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
