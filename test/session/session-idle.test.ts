/**
 * Idle sessions: onIdle, and session actors evicted after sessionIdleTtlMs of idleness (one
 * shared eviction timer).
 */
import { describe, expect, it } from 'vitest';
import { CancelMode } from '../../src/index.js';
import { createTestRuntime, gatedAgent, owner, tick } from '../helpers.js';
import { echo } from './helpers.js';

describe('session admission', () => {
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
