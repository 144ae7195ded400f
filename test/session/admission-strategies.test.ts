/**
 * Session admission under a busy session: the reject, interrupt and preempt strategies, and
 * an agent whose abort listener (run when the session cancels it) prepares and starts runs.
 */
import { describe, expect, it } from 'vitest';
import { SessionBusyError, type Agent } from '../../src/index.js';
import { createTestRuntime, gatedAgent, owner, tick } from '../helpers.js';
import { echo } from './helpers.js';

describe('session admission', () => {
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
});

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
