/**
 * runRaceProperty with the user's own agent: the ready-made agent contract passes a sound agent
 * and catches each of six planted agent bugs, naming the invariant and the run, with no model
 * written by the author.
 */
import { describe, expect, it } from 'vitest';
import { createRuntime, sleep, type Agent } from '../../src/index.js';
import { runRaceProperty, type RaceHarness, resolveRaceRuns } from '../../src/testing/index.js';
import { toolAgent, toolMs, type AgentBug } from './tool-agent.js';

const runtime = ({ clock, reportError, inspect }: RaceHarness) =>
  createRuntime({ clock, reportError, inspect, unwindTimeoutMs: 2_000 });

/** The author's promises: settle 100 ms after a cancel, a safe point at least every tool call. */
const contract = { settleWithinMs: 100, safePointWithinMs: toolMs + 50 };

describe('runRaceProperty with your own agent', () => {
  it('a sound agent keeps the agent contract', async () => {
    const report = await runRaceProperty(runtime, { agent: toolAgent(), contract, numRuns: 60 });
    expect(report.numRuns).toBe(resolveRaceRuns(60));
    // Every part of the agent was reached, so every part was judged.
    expect(report.reached?.nestedRuns).toBeGreaterThan(0);
    expect(report.reached?.safePoints).toBeGreaterThan(0);
    expect(report.reached?.results).toBeGreaterThan(0);
  }, 120_000);

  it('reports a flood of late events once per run, with a count, not once per event', async () => {
    const flood: Agent<string, string> = {
      async execute(_input, ctx) {
        await sleep(ctx.clock, 1_000, ctx.signal).catch(() => undefined);
        for (let i = 0; i < 10_000; i++) ctx.emit('agent.message', { i });
        throw new Error('stopped');
      },
    };
    const failure = await runRaceProperty(runtime, { agent: flood, numRuns: 50, seed: 3 }).catch(
      (error: unknown) => error as Error,
    );
    expect(failure).toBeInstanceOf(Error);
    const message = (failure as Error).message;
    expect(message).toMatch(
      /\[no-events-after-terminal\] run [\w-]+ emitted agent\.message .*\(\d+ times\)/,
    );
    expect(message.length).toBeLessThan(20_000);
  }, 120_000);

  // An agent whose steps take 1.5 s: the world's time scale follows `contract.stepMs`, so the
  // nested run and the long loop are reached (at the default 150 ms they never were).
  const slowMs = 1_500;
  const slow = { settleWithinMs: 100, safePointWithinMs: slowMs + 50, stepMs: slowMs };
  it.each<[AgentBug, string]>([
    ['nested-ignores-signal', 'nested-settles-with-parent|cancel-no-normal-result'],
    ['no-safe-point', 'safe-point-within-bound'],
  ])(
    'with 1.5 s steps and stepMs 1500, still catches %s as [%s]',
    async (bug, invariant) => {
      const failure = await runRaceProperty(runtime, {
        agent: toolAgent(bug, slowMs),
        contract: slow,
        numRuns: 200,
        seed: 17,
      }).catch((error: unknown) => error as Error);
      expect(failure).toBeInstanceOf(Error);
      expect((failure as Error).message).toMatch(new RegExp(`\\[(${invariant})\\] run [\\w-]+`));
    },
    120_000,
  );

  const bugs: [AgentBug, string][] = [
    ['tool-ignores-signal', 'cancel-settles'],
    ['swallowed-cancel', 'cancel-no-normal-result'],
    ['emit-after-cancel', 'no-events-after-terminal'],
    ['no-safe-point', 'safe-point-within-bound'],
    ['nested-ignores-signal', 'nested-settles-with-parent'],
    ['interrupt-throws', 'interrupt-recovery-reply'],
  ];
  it.each(bugs)(
    'catches %s as [%s], naming the run',
    async (bug, invariant) => {
      const failure = await runRaceProperty(runtime, {
        agent: toolAgent(bug),
        contract,
        numRuns: 200,
        seed: 17,
      }).catch((error: unknown) => error as Error);
      expect(failure).toBeInstanceOf(Error);
      expect((failure as Error).message).toMatch(new RegExp(`\\[${invariant}\\] run [\\w-]+`));
      expect((failure as Error).message).toMatch(/RACE_SEED=/);
      // The agent world schedules nothing, so the report has no empty interleaving block.
      expect((failure as Error).message).not.toMatch(/interleaving:/);
    },
    120_000,
  );
});
