/**
 * Helpers for the timeline tests: a runtime on a simulated clock whose inspection stream is
 * recorded, a stepping agent, and a way to move the clock and let promise callbacks run.
 */
import { SimulatedClock } from 'xstate';
import {
  createRuntime,
  createTimelineRecorder,
  parseTimelineTrace,
  sleep,
  type Agent,
  type RuntimeOptions,
  type TimelineTransition,
} from '../../src/index.js';
import { tick } from '../helpers.js';

/** A runtime on a `SimulatedClock` whose transitions are recorded into `chunks`. */
export function createRecordedRuntime({
  startAt,
  ...options
}: RuntimeOptions & { startAt?: number } = {}) {
  const clock = new SimulatedClock();
  if (startAt !== undefined) clock.set(startAt);
  const chunks: string[] = [];
  const reported: unknown[] = [];
  const recorder = createTimelineRecorder({
    clock,
    sink: (chunk) => chunks.push(chunk),
    onError: (error) => reported.push(error),
  });
  const runtime = createRuntime({
    clock,
    inspect: recorder.inspect,
    reportError: (error) => reported.push(error),
    ...options,
  });
  /**
   * Moves the clock `ms` forward in steps of at most 10 ms, letting the callbacks of each step
   * run (so a timer armed by a callback fires at its own time, not at the end of a big jump).
   */
  const advance = async (ms: number) => {
    for (let left = ms; left > 0; left -= 10) {
      await tick(); // agents started just before arm their timers first
      clock.increment(Math.min(10, left));
      await tick();
    }
  };
  return {
    runtime,
    clock,
    recorder,
    chunks,
    reported,
    advance,
    trace: () => chunks.join(''),
    transitions: (): TimelineTransition[] => parseTimelineTrace(chunks.join('')),
  };
}

/**
 * Works in `steps` steps of `stepMs` on the run's clock, reporting a safe point after each;
 * an interrupt makes it return early with `interrupted after N`.
 */
export function steppingAgent(steps: number, stepMs: number): Agent<string, string> {
  return {
    async execute(input, ctx) {
      for (let step = 1; step <= steps; step++) {
        await sleep(ctx.clock, stepMs, ctx.signal);
        if (ctx.interruptRequested) return `interrupted after ${step}`;
        ctx.safePoint(step % 2 === 0 ? 'afterToolCalls' : 'afterChatModel');
      }
      return `done ${input}`;
    },
  };
}

/** The transitions of one actor, reduced to `[t, from, to, event, cause]`. */
export function pathOf(transitions: readonly TimelineTransition[], id: string) {
  return transitions
    .filter((transition) => transition.id === id)
    .map(({ t, from, to, event, cause }) => [t, from, to, event, cause]);
}
