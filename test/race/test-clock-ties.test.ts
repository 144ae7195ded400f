/**
 * The test clock fires timers due at the same time one at a time, with promise callbacks in
 * between, as a real event loop does; so a cancel whose deadline ties with an agent's timer
 * cannot turn the run terminal while the agent's continuation waits with its signal not yet
 * aborted (found trying `runplane/testing` as an agent author would).
 */
import { describe, expect, it } from 'vitest';
import { CancelMode, createRuntime, sleep } from '../../src/index.js';
import type { Agent } from '../../src/run/agent.js';
import { createTestClock } from '../../src/testing/index.js';

describe('the test clock on timers due at the same time', () => {
  it('runs the first timer’s promise callbacks before it fires the second', async () => {
    const clock = createTestClock();
    const seen: string[] = [];
    clock.setTimeout(() => void Promise.resolve().then(() => seen.push('first, then')), 10);
    clock.setTimeout(() => seen.push('second'), 10);
    await clock.advance(10);
    expect(seen).toEqual(['first, then', 'second']);
  });

  it('an agent whose timer ties with its cancel’s escalation emits while RUNNING or sees the abort', async () => {
    const clock = createTestClock();
    const runtime = createRuntime({ clock });
    const observed: Array<{ status: string; aborted: boolean }> = [];
    const agent: Agent<string, string> = {
      async execute(_input, ctx) {
        await sleep(ctx.clock, 100, ctx.signal).catch(() => undefined);
        observed.push({ status: run.status, aborted: ctx.signal.aborted });
        ctx.signal.throwIfAborted();
        ctx.emit('agent.tool_result', { ok: true });
        ctx.safePoint('afterToolCalls');
        return 'done';
      },
    };
    const run = runtime.prepare({ ownerId: 'alice', sessionId: 's', agent, input: 'go' });
    run.start();
    await clock.advance(70);
    // Escalates at t = 100, the very time the agent's timer is due.
    run.cancel({ mode: CancelMode.AfterToolCalls, timeoutMs: 30 });
    await clock.advance(30);
    const outcome = await run.termination;
    expect(observed).toHaveLength(1);
    const [{ status, aborted }] = observed as [{ status: string; aborted: boolean }];
    // Never the window the author cannot see: terminal with the signal not aborted.
    expect(status === 'CANCELLED' && !aborted).toBe(false);
    expect(outcome.status).toBe('CANCELLED');
    await runtime.shutdown({ graceMs: 0 });
  });
});
