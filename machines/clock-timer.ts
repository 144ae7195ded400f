/**
 * Timer logic bound to an injected clock: sends `input.event` back to its parent when the clock
 * reaches the absolute time `input.at`. Deadlines stay absolute, so a restored machine re-arms
 * them correctly (XState `after` timers are not restored from a persisted snapshot, #5331).
 *
 * @module
 */
import { fromCallback, type EventObject } from 'xstate';

/** The part of a clock a timer needs (XState's `SimulatedClock` has it). Times are ms. */
export interface TimerClock {
  now(): number;
  setTimeout(fn: () => void, timeoutMs: number): unknown;
  clearTimeout(handle: unknown): void;
}

/** Input of {@link fromClockTimer} logic: fire `event` at absolute time `at` (ms). */
export interface TimerInput<TEvent extends EventObject = EventObject> {
  readonly at: number;
  readonly event: TEvent;
}

/**
 * Creates callback logic that fires once at `input.at` on `clock`; stopping the actor clears it.
 *
 * @param clock - the clock to arm the timer on
 */
export function fromClockTimer(clock: TimerClock) {
  return fromCallback<EventObject, TimerInput>(({ input, sendBack }) => {
    const handle = clock.setTimeout(
      () => sendBack(input.event),
      Math.max(0, input.at - clock.now()),
    );
    return () => clock.clearTimeout(handle);
  });
}
