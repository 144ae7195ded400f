/**
 * Session admission, the tests numbered 2 to 5: runs of one session queue behind the active
 * one; cancel and interrupt of queued, active and finished runs; the registry; cancelAll; a
 * long FIFO queue.
 */
import { describe, expect, it } from 'vitest';
import { createTestRuntime, gatedAgent, owner, tick } from '../helpers.js';

describe('session admission', () => {
  it('2. A, B, C in one session: cancel B leaves A running and C waiting; C runs after A', async () => {
    const { runtime } = createTestRuntime();
    const gate = gatedAgent();
    const [a, b, c] = ['a', 'b', 'c'].map((input) =>
      runtime.prepare({ ...owner, agent: gate.agent, input }),
    );
    a!.start();
    b!.start();
    c!.start();
    expect([a!.status, b!.status, c!.status]).toEqual(['RUNNING', 'QUEUED', 'QUEUED']);
    const session = runtime.session('alice', 's1');
    expect(session.activeRunId).toBe(a!.id);
    expect(session.queuedRunIds).toEqual([b!.id, c!.id]);

    expect(b!.cancel().contributed).toBe(true);
    expect([a!.status, b!.status, c!.status]).toEqual(['RUNNING', 'CANCELLED', 'QUEUED']);
    expect(session.queuedRunIds).toEqual([c!.id]);
    await tick();
    expect(c!.status).toBe('QUEUED');
    expect(gate.ran(b!.id)).toBe(false);

    gate.complete(a!.id, 'A');
    await gate.started(c!.id);
    expect(c!.status).toBe('RUNNING');
    gate.complete(c!.id, 'C');
    await session.onIdle();
    expect(gate.ran(b!.id)).toBe(false);
  });

  it('2. interrupt(B) on a queued run behaves exactly like cancel(B)', async () => {
    const { runtime } = createTestRuntime();
    const gate = gatedAgent();
    const [a, b, c] = ['a', 'b', 'c'].map((input) =>
      runtime.prepare({ ...owner, agent: gate.agent, input }),
    );
    a!.start();
    b!.start();
    c!.start();
    await gate.started(a!.id);
    expect(b!.interrupt()).toBe(true);
    expect([a!.status, b!.status, c!.status]).toEqual(['RUNNING', 'CANCELLED', 'QUEUED']);
    expect(gate.ctx(a!.id).interruptRequested).toBe(false);
    expect(await b!.termination).toMatchObject({ status: 'CANCELLED', cause: 'cancel' });
    gate.complete(a!.id, 'A');
    await gate.started(c!.id);
    expect(c!.status).toBe('RUNNING');
  });

  it('3. cancel A while B waits: A is CANCELLED at once, B starts only after A settled', async () => {
    const { runtime } = createTestRuntime();
    let unwind!: () => void;
    const order: string[] = [];
    const a = runtime.prepare({
      ...owner,
      input: 'a',
      agent: {
        execute: (_: string, ctx) =>
          new Promise<string>((_resolve, reject) => {
            // Honours the signal, but needs a moment to clean up.
            ctx.signal.addEventListener('abort', () => {
              unwind = () => {
                order.push('a settled');
                reject(ctx.signal.reason as Error);
              };
            });
          }),
      },
    });
    const b = runtime.prepare({
      ...owner,
      input: 'b',
      agent: {
        execute: async () => {
          order.push('b started');
          return 'b';
        },
      },
    });
    a.start();
    b.start();
    await tick();
    a.cancel();
    expect(a.status).toBe('CANCELLED');
    await tick();
    expect(b.status).toBe('QUEUED');
    expect(runtime.session('alice', 's1').activeRunId).toBe(a.id);
    unwind();
    expect(await b.result()).toBe('b');
    expect(order).toEqual(['a settled', 'b started']);
  });

  it('3. an agent that ignores its signal past unwindTimeoutMs is abandoned and the next run starts', async () => {
    const { runtime, clock } = createTestRuntime({ unwindTimeoutMs: 2_000 });
    const stubborn = gatedAgent({ honoursSignal: false });
    const next = gatedAgent();
    const a = runtime.prepare({ ...owner, agent: stubborn.agent, input: 'a' });
    const b = runtime.prepare({ ...owner, agent: next.agent, input: 'b' });
    a.start();
    b.start();
    await stubborn.started(a.id);
    a.cancel();
    clock.increment(1_999);
    await tick();
    expect(b.status).toBe('QUEUED');
    clock.increment(1);
    expect(await a.termination).toEqual({
      status: 'CANCELLED',
      cause: 'cancel',
      reason: undefined,
      escalated: false,
      unsettled: true,
    });
    await next.started(b.id);
    expect(b.status).toBe('RUNNING');
    const unsettled = await runtime.eventLog.read({}, owner, { types: ['run.unsettled'] });
    expect(unsettled.map((e) => e.runId)).toEqual([a.id]);
    // The abandoned agent finishing later changes nothing.
    stubborn.complete(a.id, 'late');
    await tick();
    expect(a.status).toBe('CANCELLED');
    expect(b.status).toBe('RUNNING');
  });

  it('4. cancel or interrupt of a finished run is ended and never touches the active run', async () => {
    const { runtime } = createTestRuntime();
    const gate = gatedAgent();
    const a = runtime.prepare({ ...owner, agent: gate.agent, input: 'a' });
    const b = runtime.prepare({ ...owner, agent: gate.agent, input: 'b' });
    a.start();
    b.start();
    gate.complete(a.id, 'A');
    await a.termination;
    await gate.started(b.id);

    const cancel = a.cancel();
    expect(cancel.contributed).toBe(false);
    expect(await cancel.outcome).toBe('ended');
    expect(a.interrupt()).toBe(false);
    expect(runtime.runs.cancel('alice', 's1', a.id)).toBe('ended');
    expect(runtime.runs.interrupt('alice', 's1', a.id)).toBe('ended');
    expect(b.status).toBe('RUNNING');
    expect(gate.ctx(b.id).interruptRequested).toBe(false);
    expect(gate.ctx(b.id).signal.aborted).toBe(false);
  });

  it('registry: lookups need owner, session and run; a wrong owner is not_found', async () => {
    const { runtime } = createTestRuntime();
    const gate = gatedAgent();
    const run = runtime.prepare({ ...owner, agent: gate.agent, input: 'a' });
    expect(runtime.runs.find('mallory', 's1', run.id)).toBeUndefined();
    expect(runtime.runs.find('alice', 'other', run.id)).toBeUndefined();
    expect(runtime.runs.cancel('mallory', 's1', run.id)).toBe('not_found');
    expect(runtime.runs.interrupt('mallory', 's1', run.id)).toBe('not_found');
    expect(runtime.runs.cancel('alice', 's1', 'no-such-run')).toBe('not_found');
    expect(run.status).toBe('CREATED');
    run.start();
    expect(runtime.runs.interrupt('alice', 's1', run.id, 'wrap up')).toBe('accepted');
    await gate.started(run.id);
    expect(gate.ctx(run.id).interruptMessage).toBe('wrap up');
    expect(runtime.runs.cancel('alice', 's1', run.id)).toBe('accepted');
    await run.termination;
    expect(runtime.runs.find('alice', 's1', run.id)).toBeUndefined(); // left the live registry
    expect(runtime.runs.cancel('alice', 's1', run.id)).toBe('ended');
    expect(runtime.runs.cancel('mallory', 's1', run.id)).toBe('not_found');
  });

  it('5. session.interrupt targets the active run only, and does nothing when idle', async () => {
    const { runtime } = createTestRuntime();
    const gate = gatedAgent();
    const session = runtime.session('alice', 's1');
    expect(session.interrupt('nobody home')).toBe('idle');
    const a = runtime.prepare({ ...owner, agent: gate.agent, input: 'a' });
    const b = runtime.prepare({ ...owner, agent: gate.agent, input: 'b' });
    a.start();
    b.start();
    await gate.started(a.id);
    expect(session.interrupt('stop please')).toBe('accepted');
    expect(gate.ctx(a.id).interruptRequested).toBe(true);
    gate.complete(a.id, 'partial');
    expect(await a.termination).toMatchObject({ status: 'COMPLETED', interrupted: true });
    await gate.started(b.id);
    // The run queued after the interrupted one is not interrupted: nothing was remembered.
    expect(gate.ctx(b.id).interruptRequested).toBe(false);
  });

  it('cancelAll cancels queued runs, and the active one with includeActive', async () => {
    const { runtime } = createTestRuntime();
    const gate = gatedAgent();
    const runs = ['a', 'b', 'c'].map((input) =>
      runtime.prepare({ ...owner, agent: gate.agent, input }),
    );
    for (const run of runs) run.start();
    const session = runtime.session('alice', 's1');
    expect(session.cancelAll()).toBe(2);
    expect(runs.map((r) => r.status)).toEqual(['RUNNING', 'CANCELLED', 'CANCELLED']);
    expect(session.cancelAll({ includeActive: true })).toBe(1);
    await session.onIdle();
    expect(runs.map((r) => r.status)).toEqual(['CANCELLED', 'CANCELLED', 'CANCELLED']);
  });

  it('a cancelled queued run is removed in O(1) and admission order stays FIFO over a long queue', async () => {
    // A long queue needs a cap above it (the default keeps a run's cost flat: README "Limits").
    const { runtime } = createTestRuntime({ maxQueuedRuns: 501 });
    const order: number[] = [];
    const agent = {
      execute: async (i: number) => {
        order.push(i);
        return i;
      },
    };
    const gate = gatedAgent();
    const head = runtime.prepare({ ...owner, agent: gate.agent, input: -1 });
    head.start();
    const runs = Array.from({ length: 500 }, (_, i) =>
      runtime.prepare({ ...owner, agent, input: i }),
    );
    for (const run of runs) run.start();
    runs.forEach((run, i) => {
      if (i % 2 === 1) run.cancel();
    });
    gate.complete(head.id, 'head');
    await runtime.session('alice', 's1').onIdle();
    expect(order).toEqual(runs.map((_, i) => i).filter((i) => i % 2 === 0));
  });
});
