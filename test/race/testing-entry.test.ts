/**
 * The `runplane/testing` entry point itself: it loads without its optional peer fast-check,
 * RACE_RUNS wins over a suite's own `numRuns`, a failure is reported once, and path divergences
 * come back grouped by cause.
 */
import { createMachine } from 'xstate';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createRuntime } from '../../src/index.js';
import {
  PathMismatchesError,
  replayPaths,
  resolveRaceRuns,
  runRaceProperty,
  type RaceHarness,
} from '../../src/testing/index.js';

describe('runplane/testing', () => {
  afterEach(() => {
    vi.unstubAllEnvs();
    vi.doUnmock('fast-check');
    vi.resetModules();
  });

  it('imports without fast-check; only the race properties ask for it', async () => {
    vi.resetModules();
    vi.doMock('fast-check', () => {
      throw new Error('Cannot find package fast-check');
    });
    const testing = await import('../../src/testing/index.js');
    const clock = testing.createTestClock();
    await clock.advance(10);
    expect(clock.now()).toBe(10);
    await expect(
      testing.runRaceProperty(({ clock: c }) => createRuntime({ clock: c }), { numRuns: 1 }),
    ).rejects.toThrow(/optional peer dependency fast-check/);
  });

  it('RACE_RUNS wins over numRuns (longer runs, or fewer under mutation, without edits)', async () => {
    vi.stubEnv('RACE_RUNS', '3');
    const report = await runRaceProperty(
      ({ clock, reportError, inspect }) =>
        createRuntime({ clock, reportError, inspect, unwindTimeoutMs: 50 }),
      { numRuns: 50, seed: 1 },
    );
    expect(report.numRuns).toBe(3);
  });

  it('refuses a run count that would check nothing or never end, with INVALID_ARGUMENT', async () => {
    const factory = ({ clock, reportError, inspect }: RaceHarness) =>
      createRuntime({ clock, reportError, inspect, unwindTimeoutMs: 50 });
    // A fractional count never ends in fast-check; 0, NaN and text would pass having run nothing.
    for (const raw of ['1.5', '0', '-1', 'abc', 'Infinity']) {
      vi.stubEnv('RACE_RUNS', raw);
      const refused = await runRaceProperty(factory, { numRuns: 5 }).catch(
        (error: unknown) => error as Error & { code?: string },
      );
      expect(refused, raw).toMatchObject({ code: 'INVALID_ARGUMENT' });
      expect((refused as Error).message, raw).toMatch(/RACE_RUNS/);
    }
    vi.stubEnv('RACE_RUNS', ' '); // blank is unset: the suite's own count applies
    for (const numRuns of [0, 1.5, Number.NaN]) {
      await expect(runRaceProperty(factory, { numRuns })).rejects.toMatchObject({
        code: 'INVALID_ARGUMENT',
      });
    }
    expect(resolveRaceRuns(7)).toBe(7);
  });

  it('a failure is printed nowhere but in the thrown error unless a log is given', async () => {
    const printed = vi.spyOn(console, 'error').mockImplementation(() => undefined);
    const failure = await runRaceProperty(
      ({ clock, reportError, inspect }) => {
        const runtime = createRuntime({ clock, reportError, inspect, unwindTimeoutMs: 50 });
        return { ...runtime, shutdown: () => new Promise(() => undefined) };
      },
      { numRuns: 5, seed: 7 },
    ).catch((error: unknown) => error as Error);
    expect(failure).toBeInstanceOf(Error);
    expect(String((failure as Error).message)).toContain('shutdown() never resolved');
    expect(printed).not.toHaveBeenCalled();
    printed.mockRestore();
  });

  it('replayPaths reports every divergent path once, grouped by cause', async () => {
    const door = createMachine({
      id: 'door',
      initial: 'closed',
      states: {
        closed: { on: { open: 'open', lock: 'locked' } },
        open: { on: { close: 'closed' } },
        locked: { on: { unlock: 'closed' } },
      },
    });
    // The real door never locks: every path through `locked` diverges the same way.
    const failure = await replayPaths(door, {
      events: [{ type: 'open' }, { type: 'close' }, { type: 'lock' }, { type: 'unlock' }],
      adapter: {
        setup: () => ({ state: 'closed' }),
        execute(real, event) {
          if (event.type === 'open' && real.state === 'closed') real.state = 'open';
          if (event.type === 'close' && real.state === 'open') real.state = 'closed';
        },
        observe: (real) => real.state,
        expected: (snapshot) => snapshot.value,
      },
    }).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(PathMismatchesError);
    const { groups, message } = failure as PathMismatchesError;
    expect(groups).toHaveLength(1);
    expect(groups[0]?.length).toBeGreaterThan(1);
    expect(groups[0]?.[0]?.path).toBe('closed -lock-> locked');
    expect(message).toMatch(/diverged, 1 distinct cause/);
  });
});
