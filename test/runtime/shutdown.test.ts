import { describe, expect, it, vi } from 'vitest';
import { ShuttingDownError, type Agent } from '../../src/index.js';
import { createTestRuntime, gatedAgent, tick, waitForCancel } from '../helpers.js';

const owner = { ownerId: 'alice', sessionId: 's1' };

describe('runtime.shutdown', () => {
  it('12. cancels created and queued runs, interrupts running ones; drained when they finish in time', async () => {
    const { runtime } = createTestRuntime();
    const gate = gatedAgent();
    // The running agent wraps up as soon as it is interrupted.
    const polite: Agent<string, string> = {
      async execute(input, ctx) {
        await new Promise<void>((resolve) => {
          const poll = () => (ctx.interruptRequested ? resolve() : setImmediate(poll));
          poll();
        });
        return `${input}: wrapped up`;
      },
    };
    const running = runtime.prepare({ ...owner, agent: polite, input: 'a' });
    const queued = runtime.prepare({ ...owner, agent: gate.agent, input: 'b' });
    const created = runtime.prepare({
      ownerId: 'alice',
      sessionId: 's2',
      agent: gate.agent,
      input: 'c',
    });
    running.start();
    queued.start();
    await tick();

    const result = await runtime.shutdown({ graceMs: 5_000 });
    expect(result).toEqual({ drained: true });
    expect(await running.termination).toEqual({
      status: 'COMPLETED',
      output: 'a: wrapped up',
      interrupted: true,
    });
    expect(await queued.termination).toMatchObject({ status: 'CANCELLED', cause: 'shutdown' });
    expect(await created.termination).toMatchObject({ status: 'CANCELLED', cause: 'shutdown' });
    expect(gate.executions).toHaveLength(0);
    expect(runtime.runs.size).toBe(0);
    expect(() => runtime.prepare({ ...owner, agent: gate.agent, input: 'late' })).toThrow(
      ShuttingDownError,
    );
    expect(() => runtime.prepare({ ...owner, agent: gate.agent, input: 'late' })).toThrow(
      expect.objectContaining({ code: 'SHUTTING_DOWN' }),
    );
    // Idempotent: a second call gets the same answer.
    expect(await runtime.shutdown({ graceMs: 1 })).toEqual({ drained: true });
  });

  it('cancels a run with nested runs at the end of the grace from outside any transition (XState never warns)', async () => {
    // XState's development build warns when an action drives another actor imperatively; the
    // shutdown's cancels reach the runs one microtask after the runtime machine's step.
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => undefined);
    try {
      const { runtime, clock } = createTestRuntime();
      const parent: Agent<string, string> = {
        async execute(_input, ctx) {
          ctx.spawn(waitForCancel, 'nested');
          return waitForCancel.execute('parent', ctx);
        },
      };
      const run = runtime.prepare({ ...owner, agent: parent, input: 'a' });
      run.start();
      await tick();
      const shutdown = runtime.shutdown({ graceMs: 1_000 });
      await tick();
      clock.increment(1_000);
      expect(await shutdown).toEqual({ drained: false });
      expect(await run.termination).toMatchObject({ status: 'CANCELLED', cause: 'shutdown' });
      expect(warn.mock.calls.map(([message]) => String(message))).toEqual([]);
    } finally {
      warn.mockRestore();
    }
  });

  it('no timer is left armed on the clock after shutdown', async () => {
    const { runtime, clock } = createTestRuntime({ sessionIdleTtlMs: 60_000 });
    const gate = gatedAgent();
    const timed = runtime.prepare({ ...owner, agent: gate.agent, input: 'a', timeoutMs: 10_000 });
    timed.start();
    await gate.started(timed.id);
    gate.complete(timed.id, 'done');
    await timed.termination;
    const pending = (clock as unknown as { timeouts: Map<unknown, unknown> }).timeouts;
    expect(pending.size).toBeGreaterThan(0); // the idle session's eviction timer
    expect(await runtime.shutdown({ graceMs: 1_000 })).toEqual({ drained: true });
    expect(pending.size).toBe(0);
  });

  it('12. a running run that ignores the interrupt is cancelled after graceMs; drained is false', async () => {
    const { runtime, clock } = createTestRuntime();
    const gate = gatedAgent(); // ignores interrupts, honours its signal
    const run = runtime.prepare({ ...owner, agent: gate.agent, input: 'a' });
    run.start();
    await gate.started(run.id);
    let finished: { drained: boolean } | undefined;
    const shutdown = runtime.shutdown({ graceMs: 1_000 }).then((r) => (finished = r));
    await tick();
    expect(gate.ctx(run.id).interruptRequested).toBe(true);
    clock.increment(999);
    await tick();
    expect(finished).toBeUndefined();
    expect(run.status).toBe('RUNNING');
    clock.increment(1);
    await shutdown;
    expect(finished).toEqual({ drained: false });
    expect(await run.termination).toMatchObject({
      status: 'CANCELLED',
      cause: 'shutdown',
      unsettled: false,
    });
  });

  it('12. an agent that ignores even its signal is abandoned; shutdown still finishes, not drained', async () => {
    const { runtime, clock } = createTestRuntime({ unwindTimeoutMs: 500 });
    const gate = gatedAgent({ honoursSignal: false });
    const run = runtime.prepare({ ...owner, agent: gate.agent, input: 'a' });
    run.start();
    await gate.started(run.id);
    const shutdown = runtime.shutdown({ graceMs: 100 });
    await tick();
    clock.increment(100);
    await tick();
    clock.increment(500);
    expect(await shutdown).toEqual({ drained: false });
    expect(await run.termination).toMatchObject({ status: 'CANCELLED', unsettled: true });
  });

  it('a shutdown() after the runtime stopped answers the same result and warns about nothing', async () => {
    const { runtime } = createTestRuntime();
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => undefined);
    try {
      expect(await runtime.shutdown({ graceMs: 0 })).toEqual({ drained: true });
      expect(await runtime.shutdown({ graceMs: 0 })).toEqual({ drained: true });
      expect(warn).not.toHaveBeenCalled();
    } finally {
      warn.mockRestore();
    }
  });
});
