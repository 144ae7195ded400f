/**
 * The runtime's per-owner cap (`maxRunningRunsPerOwner`) under random interleavings of every
 * control (see runRaceProperty): the world's single owner may run one run at a time, so the world
 * checks the cap as it checks `maxConcurrentRuns: 1`: never two running, never a session that
 * stalls while a slot is free, slots granted FIFO and never leaked.
 */
import { describe, expect, it } from 'vitest';
import { createRuntime } from '../../src/index.js';
import { runRaceProperty, resolveRaceRuns } from '../../src/testing/index.js';

describe('race properties of the runtime under a per-owner cap', () => {
  it('maxRunningRunsPerOwner: 1 across three sessions of one owner keeps every invariant', async () => {
    const report = await runRaceProperty(
      ({ clock, reportError, inspect }) =>
        createRuntime({
          clock,
          reportError,
          inspect,
          unwindTimeoutMs: 80,
          maxRunningRunsPerOwner: 1,
        }),
      { sessions: ['s1', 's2', 's3'], maxConcurrentRuns: 1 },
    );
    expect(report.numRuns).toBe(resolveRaceRuns(200));
  }, 120_000);
});
