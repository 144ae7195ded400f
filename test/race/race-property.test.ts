/**
 * runRaceProperty itself: it catches a runtime that breaks an invariant, names the seed and the
 * path, and replays exactly that case from them.
 */
import { describe, expect, it, vi } from 'vitest';
import { createRuntime, type Runtime } from '../../src/index.js';
import { runRaceProperty, type RaceHarness } from '../../src/testing/index.js';

/** A runtime whose `session.cancelAll()` also cancels the active run: a stale cancel effect. */
function leakyRuntime({ clock, reportError, inspect }: RaceHarness): Runtime {
  const runtime = createRuntime({ clock, reportError, inspect, unwindTimeoutMs: 80 });
  return {
    ...runtime,
    session(ownerId, sessionId) {
      const session = runtime.session(ownerId, sessionId);
      return {
        ...session,
        get activeRunId() {
          return session.activeRunId;
        },
        get queuedRunIds() {
          return session.queuedRunIds;
        },
        cancelAll: () => session.cancelAll({ includeActive: true }),
      };
    },
  };
}

describe('runRaceProperty', () => {
  it('catches a stale cancel effect, reports seed and path, and replays it from them', async () => {
    // This case needs its 500 sequences, whatever RACE_RUNS a run (e.g. under mutation) sets.
    vi.stubEnv('RACE_RUNS', '');
    const logged: string[] = [];
    const failure = await runRaceProperty(leakyRuntime, {
      numRuns: 500,
      seed: 42,
      log: (report) => logged.push(report),
    }).then(
      () => undefined,
      (error: unknown) => error as Error,
    );
    expect(failure).toBeInstanceOf(Error);
    const message = failure?.message ?? '';
    expect(message).toMatch(/session\.cancelAll\(s\d\) changed run r\d+, which it does not target/);
    expect(logged).toEqual([message]);
    const replay = /RACE_SEED=(-?\d+) RACE_PATH="([^"]*)"(?: RACE_REPLAY_PATH="([^"]*)")?/.exec(
      message,
    );
    expect(replay).not.toBeNull();
    const [, seed, path, replayPath] = replay ?? [];

    const again = await runRaceProperty(leakyRuntime, {
      seed: Number(seed),
      path,
      ...(replayPath === undefined ? {} : { replayPath }),
      log: () => undefined,
    }).then(
      () => undefined,
      (error: unknown) => error as Error,
    );
    // The same shrunk case, the same steps.
    const steps = (text: string) => /steps: (.*)/.exec(text)?.[1];
    expect(again?.message).toContain('changed run');
    expect(steps(again?.message ?? '')).toBe(steps(message));
    vi.unstubAllEnvs();
  }, 120_000);
});
