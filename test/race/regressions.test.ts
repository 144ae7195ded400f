/**
 * Regression inputs from public bug reports in other agent and workflow runtimes, restated in
 * runplane's terms (issue 7). Every test drives time with the test clock and agents by hand;
 * nothing waits on the wall clock.
 */
import { describe, expect, it } from 'vitest';
import { CancelMode, createRuntime, type AgentRun } from '../../src/index.js';
import { createScriptedAgent, createTestClock } from '../../src/testing/index.js';

const owner = { ownerId: 'alice', sessionId: 's1' };

function setup(options: { unwindTimeoutMs?: number } = {}) {
  const clock = createTestClock();
  const reported: unknown[] = [];
  const runtime = createRuntime({
    clock,
    reportError: (error) => reported.push(error),
    unwindTimeoutMs: options.unwindTimeoutMs ?? 1_000,
  });
  return { clock, runtime, reported };
}

describe('regressions from public bug reports', () => {
  it('a cancel after the run ended is a no-op that answers ended, whatever the ending (temporalio/sdk-rust #705)', async () => {
    const { clock, runtime, reported } = setup();
    const agent = createScriptedAgent<string>();
    const [completed, failed, cancelled] = ['c', 'f', 'x'].map((id) =>
      runtime.prepare({ ...owner, sessionId: id, agent, input: id, runId: id }),
    ) as [AgentRun<string>, AgentRun<string>, AgentRun<string>];
    for (const run of [completed, failed, cancelled]) run.start();
    agent.complete('c', 'done');
    agent.fail('f', new Error('boom'));
    cancelled.cancel();
    await clock.flush();
    const outcomes = await Promise.all([completed, failed, cancelled].map((r) => r.termination));

    for (const [index, run] of [completed, failed, cancelled].entries()) {
      for (const mode of [CancelMode.Immediate, CancelMode.AnySafePoint]) {
        const result = run.cancel({ mode, timeoutMs: 10 });
        expect(result.contributed).toBe(false);
        expect(await result.outcome).toBe('ended');
      }
      expect(run.interrupt()).toBe(false);
      expect(runtime.runs.cancel(owner.ownerId, run.sessionId, run.id)).toBe('ended');
      await clock.advance(100);
      expect(await run.termination).toBe(outcomes[index]);
    }
    expect(outcomes.map((o) => o.status)).toEqual(['COMPLETED', 'FAILED', 'CANCELLED']);
    expect(reported).toEqual([]);
  });
});
