/**
 * A controllable clock for tests: time moves only when the test says so.
 *
 * @module
 */
import type { Clock } from '../clock.js';

interface PendingTimer {
  readonly id: number;
  readonly dueAt: number;
  readonly fn: () => void;
}

/**
 * A {@link Clock} that a test drives by hand, shaped like XState's `SimulatedClock` (`now`,
 * `setTimeout`, `clearTimeout`, `increment`, `set`) plus asynchronous helpers.
 *
 * @remarks
 * Unlike `SimulatedClock.increment`, which jumps to the target time and then fires every due
 * timer, this clock fires timers one at a time **at their own due time** (ties in arming order),
 * so a timer callback that reads `now()` sees the time it was due. {@link TestClock.advance} also
 * lets promise callbacks run between two timers, as they would on a real clock; that is what
 * makes an agent that reacts to an aborted signal settle before the next deadline fires.
 */
export interface TestClock extends Clock {
  /** Number of timers armed and not yet fired or cleared. */
  readonly pendingTimers: number;
  /** Due time (ms) of the earliest armed timer, or `undefined` when none is armed. */
  readonly nextTimerAt: number | undefined;
  /**
   * Moves time forward by `ms` synchronously, firing due timers in order (no promise callback
   * runs in between). Prefer {@link TestClock.advance} in async tests.
   *
   * @param ms - how far to move, in ms (a non-negative finite number)
   * @throws RangeError when `ms` is negative or not finite
   */
  increment(ms: number): void;
  /**
   * Moves time to the absolute time `at` synchronously (see {@link TestClock.increment}).
   *
   * @param at - the new time, in ms; never earlier than `now()`
   * @throws RangeError when `at` is earlier than `now()`
   */
  set(at: number): void;
  /**
   * Moves time forward by `ms`, firing each due timer at its due time and letting pending
   * promise callbacks run after each one and at the end.
   *
   * @param ms - how far to move, in ms (a non-negative finite number)
   * @returns a promise that resolves once time has moved and callbacks have run
   * @throws RangeError (as a rejection) when `ms` is negative or not finite
   */
  advance(ms: number): Promise<void>;
  /**
   * Lets every pending promise callback run (one macrotask turn), firing timers that are due
   * now (a `setTimeout(fn, 0)` fires here, as it would on a real clock). Never moves time.
   *
   * @param rounds - how many macrotask turns to take (default 1)
   * @returns a promise that resolves after those turns
   */
  flush(rounds?: number): Promise<void>;
}

const macrotask = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/**
 * Creates a {@link TestClock} starting at time `start`.
 *
 * @remarks Hand it to `createRuntime({ clock })`; every timer runplane arms (deadlines,
 * escalations, grace periods, unwind budgets, idle clocks) then waits for the test to move time.
 * Timers are never real: nothing fires while the test awaits something else.
 *
 * @param start - the initial time, in ms (default 0)
 * @returns a fresh clock with no timer armed
 * @throws RangeError when `start` is not a finite number
 * @example
 * ```ts
 * const clock = createTestClock();
 * const runtime = createRuntime({ clock });
 * // ... start a run with timeoutMs: 1_000
 * await clock.advance(1_000); // the deadline fires and the agent's unwinding runs
 * ```
 */
export function createTestClock(start = 0): TestClock {
  if (!Number.isFinite(start))
    throw new RangeError(`expected \`start\` to be finite, got ${start}`);
  let now = start;
  let nextId = 1;
  const timers = new Map<number, PendingTimer>();

  const earliestDue = (until: number): PendingTimer | undefined => {
    let earliest: PendingTimer | undefined;
    for (const timer of timers.values()) {
      if (timer.dueAt > until) continue;
      if (earliest === undefined || timer.dueAt < earliest.dueAt) earliest = timer;
    }
    return earliest; // Map order is arming order, so ties go to the first armed.
  };

  const fire = (timer: PendingTimer): void => {
    timers.delete(timer.id);
    now = Math.max(now, timer.dueAt);
    timer.fn();
  };

  const checkStep = (ms: number): void => {
    if (!(Number.isFinite(ms) && ms >= 0)) {
      throw new RangeError(`expected \`ms\` to be a non-negative finite number, got ${ms}`);
    }
  };

  const moveTo = (target: number): void => {
    for (let timer = earliestDue(target); timer; timer = earliestDue(target)) fire(timer);
    now = target;
  };

  const clock: TestClock = {
    now: () => now,
    setTimeout(fn, timeoutMs) {
      const id = nextId++;
      const delay = Number.isFinite(timeoutMs) && timeoutMs > 0 ? timeoutMs : 0;
      timers.set(id, { id, dueAt: now + delay, fn });
      return id;
    },
    clearTimeout(handle) {
      timers.delete(handle as number);
    },
    get pendingTimers() {
      return timers.size;
    },
    get nextTimerAt() {
      return earliestDue(Number.POSITIVE_INFINITY)?.dueAt;
    },
    increment(ms) {
      checkStep(ms);
      moveTo(now + ms);
    },
    set(at) {
      if (!(Number.isFinite(at) && at >= now)) {
        throw new RangeError(`expected \`at\` to be a finite time >= ${now}, got ${at}`);
      }
      moveTo(at);
    },
    async advance(ms) {
      checkStep(ms);
      const target = now + ms;
      await clock.flush();
      for (let timer = earliestDue(target); timer; timer = earliestDue(target)) {
        fire(timer);
        await clock.flush();
      }
      now = target;
      await clock.flush();
    },
    async flush(rounds = 1) {
      // Callbacks first, then one due timer at a time with callbacks in between, also for
      // timers due at the same time: a real event loop runs promise callbacks between two
      // timer callbacks.
      for (let round = 0; round < rounds; round++) {
        await macrotask();
        for (let timer = earliestDue(now); timer; timer = earliestDue(now)) {
          fire(timer);
          await macrotask();
        }
      }
    },
  };
  return clock;
}
