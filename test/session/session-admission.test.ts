import { describe, expect, it } from 'vitest';
import { CancelMode, SessionBusyError, type Agent } from '../../src/index.js';
import { createTestRuntime, gatedAgent, tick } from '../helpers.js';

const owner = { ownerId: 'alice', sessionId: 's1' };

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

  it('11. different sessions run concurrently; maxConcurrentRuns caps the total', async () => {
    const { runtime } = createTestRuntime({ maxConcurrentRuns: 2 });
    const gate = gatedAgent();
    const runs = ['s1', 's2', 's3', 's4'].map((sessionId) =>
      runtime.prepare({ ownerId: 'alice', sessionId, agent: gate.agent, input: sessionId }),
    );
    for (const run of runs) run.start();
    expect(runs.map((r) => r.status)).toEqual(['RUNNING', 'RUNNING', 'QUEUED', 'QUEUED']);
    gate.complete(runs[1]!.id, 'done');
    await gate.started(runs[2]!.id);
    expect(runs.map((r) => r.status)).toEqual(['RUNNING', 'COMPLETED', 'RUNNING', 'QUEUED']);
    runs[3]!.cancel(); // a waiting session withdraws its slot request
    gate.complete(runs[0]!.id, 'done');
    gate.complete(runs[2]!.id, 'done');
    await Promise.all(runs.map((r) => r.termination));
    const late = runtime.prepare({
      ownerId: 'alice',
      sessionId: 's5',
      agent: gate.agent,
      input: 'x',
    });
    late.start();
    expect(late.status).toBe('RUNNING'); // every slot came back
  });

  it('11. without a cap, many sessions all run at once', () => {
    const { runtime } = createTestRuntime();
    const gate = gatedAgent();
    const runs = Array.from({ length: 50 }, (_, i) =>
      runtime.prepare({ ownerId: 'alice', sessionId: `s${i}`, agent: gate.agent, input: i }),
    );
    for (const run of runs) run.start();
    expect(runs.every((r) => r.status === 'RUNNING')).toBe(true);
  });

  it('strategy reject: SESSION_BUSY naming the active run; the rejected run is cancelled', async () => {
    const { runtime } = createTestRuntime();
    const gate = gatedAgent();
    const a = runtime.prepare({ ...owner, agent: gate.agent, input: 'a' });
    a.start();
    const b = runtime.prepare({ ...owner, agent: gate.agent, input: 'b', strategy: 'reject' });
    let thrown: unknown;
    try {
      b.start();
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(SessionBusyError);
    expect(thrown).toMatchObject({ code: 'SESSION_BUSY', activeRunId: a.id });
    expect(b.status).toBe('CANCELLED');
    gate.complete(a.id, 'A');
    await runtime.session('alice', 's1').onIdle();
    const c = runtime.prepare({ ...owner, agent: gate.agent, input: 'c', strategy: 'reject' });
    c.start(); // idle session: accepted
    expect(c.status).toBe('RUNNING');
  });

  it('strategy interrupt: the active run is interrupted, cancelled after graceMs, then the new run runs', async () => {
    const { runtime, clock } = createTestRuntime();
    const gate = gatedAgent();
    const a = runtime.prepare({ ...owner, agent: gate.agent, input: 'a' });
    a.start();
    await gate.started(a.id);
    const b = runtime.prepare({
      ...owner,
      agent: gate.agent,
      input: 'b',
      strategy: 'interrupt',
      graceMs: 1_000,
    });
    b.start();
    expect(gate.ctx(a.id).interruptRequested).toBe(true);
    expect(b.status).toBe('QUEUED');
    clock.increment(999);
    expect(a.status).toBe('RUNNING');
    clock.increment(1);
    expect(a.status).toBe('CANCELLED');
    await gate.started(b.id);
    expect(b.status).toBe('RUNNING');
  });

  it('strategy interrupt: an active run that wraps up within graceMs is not cancelled', async () => {
    const { runtime, clock } = createTestRuntime();
    const gate = gatedAgent();
    const a = runtime.prepare({ ...owner, agent: gate.agent, input: 'a' });
    a.start();
    await gate.started(a.id);
    const b = runtime.prepare({
      ...owner,
      agent: gate.agent,
      input: 'b',
      strategy: 'interrupt',
      graceMs: 1_000,
    });
    b.start();
    gate.complete(a.id, 'wrapped up');
    expect(await a.termination).toMatchObject({ status: 'COMPLETED', interrupted: true });
    await gate.started(b.id);
    clock.increment(1_000); // the grace timer is gone with the interrupted run
    expect(b.status).toBe('RUNNING');
  });

  it('strategy preempt: queued runs are cancelled, the active one stops at its next safe point', async () => {
    const { runtime } = createTestRuntime();
    const gate = gatedAgent();
    const a = runtime.prepare({
      ...owner,
      input: 'a',
      agent: {
        async execute(input: string, ctx) {
          await gate.agent.execute(input, ctx);
          ctx.safePoint('afterChatModel');
          return 'not reached';
        },
      },
    });
    const queued = runtime.prepare({ ...owner, agent: gate.agent, input: 'queued' });
    a.start();
    queued.start();
    await gate.started(a.id);
    const urgent = runtime.prepare({
      ...owner,
      agent: gate.agent,
      input: 'urgent',
      strategy: 'preempt',
    });
    urgent.start();
    expect(queued.status).toBe('CANCELLED');
    expect(await queued.termination).toMatchObject({ cause: 'preempt' });
    expect(a.status).toBe('RUNNING');
    gate.complete(a.id, '');
    expect(await a.termination).toMatchObject({
      status: 'CANCELLED',
      cause: 'preempt',
      escalated: false,
    });
    await gate.started(urgent.id);
    expect(urgent.status).toBe('RUNNING');
  });

  it('strategy preempt escalates after graceMs when no safe point comes', async () => {
    const { runtime, clock } = createTestRuntime();
    const gate = gatedAgent();
    const a = runtime.prepare({ ...owner, agent: gate.agent, input: 'a' });
    a.start();
    await gate.started(a.id);
    const urgent = runtime.prepare({
      ...owner,
      agent: gate.agent,
      input: 'u',
      strategy: 'preempt',
      graceMs: 300,
    });
    urgent.start();
    clock.increment(300);
    expect(await a.termination).toMatchObject({
      status: 'CANCELLED',
      cause: 'preempt',
      escalated: true,
    });
    await gate.started(urgent.id);
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

  it('onIdle resolves at once for an idle session and after the last run otherwise', async () => {
    const { runtime } = createTestRuntime();
    await runtime.session('alice', 'fresh').onIdle();
    const gate = gatedAgent();
    const run = runtime.prepare({ ...owner, agent: gate.agent, input: 'a' });
    run.start();
    let idle = false;
    const waiting = runtime
      .session('alice', 's1')
      .onIdle()
      .then(() => (idle = true));
    await tick();
    expect(idle).toBe(false);
    gate.complete(run.id, 'x');
    await waiting;
    expect(idle).toBe(true);
  });

  it('an idle session actor is evicted after sessionIdleTtlMs of idleness and comes back on demand', async () => {
    // Session actors as XState's inspection API sees them created.
    const sessionActors: unknown[] = [];
    const { runtime, clock } = createTestRuntime({
      sessionIdleTtlMs: 1_000,
      inspect: (event) => {
        const logic = (event.actorRef as { logic?: { id?: string } }).logic;
        if (event.type === '@xstate.actor' && logic?.id === 'session')
          sessionActors.push(event.actorRef);
      },
    });
    const gate = gatedAgent();
    const runOnce = async (input: string) => {
      const run = runtime.prepare({ ...owner, agent: gate.agent, input });
      run.start();
      gate.complete(run.id, input.toUpperCase());
      await run.termination;
    };
    await runOnce('a'); // t = 0: the session actor is created
    expect(sessionActors).toHaveLength(1);
    clock.increment(600);
    await runOnce('b'); // t = 600: used again, so idle only since now
    clock.increment(600); // t = 1,200: the first timer fires, idle for 600 ms only
    await runOnce('c');
    expect(sessionActors).toHaveLength(1); // not evicted while in use
    clock.increment(999); // t = 2,199: idle for 999 ms
    expect((sessionActors[0] as { getSnapshot(): { status: string } }).getSnapshot().status).toBe(
      'active',
    );
    clock.increment(1); // t = 2,200: idle for 1,000 ms
    expect((sessionActors[0] as { getSnapshot(): { status: string } }).getSnapshot().status).toBe(
      'stopped',
    );
    expect(runtime.session('alice', 's1').activeRunId).toBeUndefined();

    const d = runtime.prepare({ ...owner, agent: gate.agent, input: 'd' });
    d.start();
    expect(d.status).toBe('RUNNING');
    expect(sessionActors).toHaveLength(2); // a fresh session actor
    expect(runtime.session('alice', 's1').activeRunId).toBe(d.id);
    const cancel = d.cancel({ mode: CancelMode.Immediate });
    expect(await cancel.outcome).toBe('cancelled');
  });
  it('sessions share one eviction timer, and each is evicted sessionIdleTtlMs after its own last activity', async () => {
    // Session actors as XState's inspection API sees them created: session s is the s-th.
    const sessionActors: Array<{ getSnapshot(): { status: string } }> = [];
    const { runtime, clock } = createTestRuntime({
      sessionIdleTtlMs: 1_000,
      inspect: (event) => {
        const ref = event.actorRef as {
          logic?: { id?: string };
          getSnapshot(): { status: string };
        };
        if (event.type === '@xstate.actor' && ref.logic?.id === 'session') sessionActors.push(ref);
      },
    });
    // Timers armed from now on: one per session would be 20.
    let armed = 0;
    const setTimeout = clock.setTimeout.bind(clock);
    clock.setTimeout = (fn, ms) => {
      armed++;
      return setTimeout(fn, ms);
    };
    const runIn = async (sessionId: string) => {
      const run = runtime.prepare({ ownerId: 'alice', sessionId, agent: echo, input: sessionId });
      run.start();
      await run.termination;
    };
    for (let s = 0; s < 20; s++) {
      await runIn(`s${s}`); // session s last active at t = 10 s
      clock.increment(10);
    }
    expect(armed).toBe(1);
    expect(sessionActors).toHaveLength(20);
    const status = (s: number) => sessionActors[s]?.getSnapshot().status;
    clock.increment(1_000 - 200 - 1); // t = 999: s0 was active at 0
    expect(status(0)).toBe('active');
    clock.increment(1); // t = 1,000
    expect(status(0)).toBe('stopped');
    expect(status(1)).toBe('active');
    await runIn('s1'); // t = 1,000: s1 active again
    clock.increment(10); // t = 1,010: s2 (active at 20) is not due yet, s1 not either
    expect([status(1), status(2)]).toEqual(['active', 'active']);
    clock.increment(10); // t = 1,020
    expect([status(1), status(2), status(3)]).toEqual(['active', 'stopped', 'active']);
    clock.increment(1_000); // t = 2,020: everyone idle for at least 1,000 ms
    expect(sessionActors.every((a) => a.getSnapshot().status === 'stopped')).toBe(true);
  });
});

const echo: Agent<string, string> = { execute: (input) => Promise.resolve(input) };

describe("an agent's abort listener may prepare and start runs", () => {
  it('in its own session, when the session cancels it mid-step (interrupt grace over)', async () => {
    const { runtime, clock, reported } = createTestRuntime();
    const key = { ownerId: 'alice', sessionId: 'follow-up' };
    const followUps: Array<{ id: string } | { error: unknown }> = [];
    const stubborn: Agent<string, string> = {
      execute: (_input, ctx) =>
        new Promise((resolve) => {
          ctx.signal.addEventListener('abort', () => {
            // Agent code, run when the session's grace cancel aborts this run.
            try {
              const next = runtime.prepare({ ...key, agent: echo, input: 'follow-up' });
              next.start();
              followUps.push({ id: next.id });
            } catch (error) {
              followUps.push({ error });
            }
            resolve('stopped');
          });
        }),
    };
    const first = runtime.prepare({ ...key, agent: stubborn, input: 'first' });
    first.start();
    await tick();
    const newer = runtime.prepare({
      ...key,
      agent: echo,
      input: 'newer',
      strategy: 'interrupt',
      graceMs: 100,
    });
    newer.start();
    clock.increment(100); // the grace is over: the session cancels the first run in its own step
    expect(await first.termination).toMatchObject({ status: 'CANCELLED' });
    expect(followUps).toHaveLength(1);
    expect(followUps[0]).toHaveProperty('id');
    const followUp = runtime.runs.find(
      key.ownerId,
      key.sessionId,
      (followUps[0] as { id: string }).id,
    );
    expect(await newer.result()).toBe('newer');
    expect(await followUp?.result()).toBe('follow-up');
    expect(reported).toEqual([]);
    // Nothing is left behind: no orphan child holds a slot of the session.
    await runtime.session(key.ownerId, key.sessionId).onIdle();
    expect(runtime.runs.size).toBe(0);
  });
});
