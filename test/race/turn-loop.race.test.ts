/**
 * Property-based race testing of the TurnLoop: pushes (plain, preempt of each mode, escalating,
 * delayed, by strategy, bursts in one tick, late), stops of each mode, agent results and
 * checkpoint + restart, a host shutdown at any step, foreign runs in the loop's session and, under
 * `maxConcurrentRuns`, in another one, with item conservation across restarts (see
 * runTurnLoopRaceProperty).
 * At least 200 sequences in `npm test`; RACE_RUNS / RACE_SEED / RACE_PATH / RACE_REPLAY_PATH as
 * for the runtime properties.
 */
import { describe, expect, it } from 'vitest';
import { createRuntime } from '../../src/index.js';
import { runTurnLoopRaceProperty, resolveRaceRuns } from '../../src/testing/index.js';

describe('race properties of the TurnLoop', () => {
  it('push, preempt, strategy, stop (each mode), late push, checkpoint and restart conserve every item', async () => {
    const report = await runTurnLoopRaceProperty(
      ({ clock, reportError, inspect }) =>
        createRuntime({ clock, reportError, inspect, unwindTimeoutMs: 50 }),
      { stopWithinMs: 100 },
    );
    expect(report.numRuns).toBe(resolveRaceRuns(200));
  }, 120_000);

  it('the same with foreign runs holding the only runtime slot (maxConcurrentRuns: 1)', async () => {
    const report = await runTurnLoopRaceProperty(
      ({ clock, reportError, inspect }) =>
        createRuntime({ clock, reportError, inspect, unwindTimeoutMs: 50, maxConcurrentRuns: 1 }),
      { stopWithinMs: 100, maxConcurrentRuns: 1, numRuns: 100 },
    );
    expect(report.numRuns).toBe(resolveRaceRuns(100));
  }, 120_000);
});
