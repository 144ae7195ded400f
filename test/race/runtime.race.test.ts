/**
 * Property-based race testing of the run and session layers: random interleavings of every
 * control (see runRaceProperty), at least 200 sequences per property in `npm test`.
 * RACE_RUNS=N runs more; a failure prints RACE_SEED / RACE_PATH / RACE_REPLAY_PATH to replay it.
 */
import { describe, expect, it } from 'vitest';
import { createRuntime } from '../../src/index.js';
import { runRaceProperty, resolveRaceRuns } from '../../src/testing/index.js';

describe('race properties of the runtime', () => {
  it('runs, sessions, cancels, interrupts, timeouts and shutdown keep every invariant', async () => {
    const report = await runRaceProperty(({ clock, reportError, inspect }) =>
      createRuntime({ clock, reportError, inspect, unwindTimeoutMs: 80, sessionIdleTtlMs: 500 }),
    );
    expect(report.numRuns).toBe(resolveRaceRuns(200));
  }, 120_000);

  it('the same under maxConcurrentRuns: 1 across three sessions (slots are granted FIFO, never leaked)', async () => {
    const report = await runRaceProperty(
      ({ clock, reportError, inspect }) =>
        createRuntime({ clock, reportError, inspect, unwindTimeoutMs: 80, maxConcurrentRuns: 1 }),
      { sessions: ['s1', 's2', 's3'], maxConcurrentRuns: 1 },
    );
    expect(report.numRuns).toBe(resolveRaceRuns(200));
  }, 120_000);
});
