/**
 * The busy-session rule as one table (README "The controls"; the session machine decides it,
 * machines/session.machine.ts): for each state a session can be in when a run starts, and each
 * strategy, what happens to the new run, to the queue and to the active run. Every row runs
 * against the real runtime.
 */
import { describe, expect, it } from 'vitest';
import { createRuntime, type AgentRun, type SessionStrategy } from '../../src/index.js';
import { createScriptedAgent, createTestClock } from '../../src/testing/index.js';
import { busySessionTable as table } from './busy-session-table.js';

describe('the busy-session rule, one table', () => {
  for (const row of table) {
    it(`${row.before} + ${row.strategy}: new run ${row.newRun}, line [${row.queue.join(', ')}]`, async () => {
      const clock = createTestClock();
      const runtime = createRuntime({
        clock,
        ...(row.before === 'waiting for a slot' ? { maxConcurrentRuns: 1 } : {}),
      });
      const agent = createScriptedAgent<string>();
      const key = { ownerId: 'alice', sessionId: 's' };
      const runs = new Map<string, AgentRun<unknown>>();
      const start = (name: string, strategy: SessionStrategy, sessionId = key.sessionId) => {
        const run = runtime.prepare({
          ...key,
          sessionId,
          agent,
          input: name,
          strategy,
          graceMs: 1_000,
          runId: name,
        });
        runs.set(name, run);
        run.start();
        return run;
      };
      if (row.before === 'waiting for a slot') start('holder', 'enqueue', 'other');
      if (row.before === 'active') start('a', 'enqueue');
      if (row.before !== 'idle') start('q', 'enqueue');
      await clock.flush();

      let refused: unknown;
      try {
        start('n', row.strategy);
      } catch (error) {
        refused = error;
      }
      await clock.flush();
      const session = runtime.session(key.ownerId, key.sessionId);
      const n = runs.get('n');
      if (row.newRun === 'refused') {
        expect(refused).toMatchObject({ code: 'SESSION_BUSY' });
        expect(n?.status).toBe('CANCELLED');
        expect(n?.agentStarted).toBe(false);
      } else {
        expect(refused).toBeUndefined();
        expect(n?.status).toBe(row.newRun);
      }
      expect(session.queuedRunIds).toEqual(row.queue);

      const a = runs.get('a');
      if (row.active !== undefined) {
        const ctx = agent.context('a');
        expect(a?.status).toBe('RUNNING');
        expect(ctx?.interruptRequested).toBe(row.active === 'interrupted');
        if (row.active === 'cancelling at a safe point') {
          // It ends at its next safe point, with cause preempt.
          agent.safePoint('a', 'afterToolCalls');
          await clock.flush();
          expect(await a?.termination).toMatchObject({ status: 'CANCELLED', cause: 'preempt' });
        } else {
          expect(ctx?.signal.aborted).toBe(false);
        }
      }
      const q = runs.get('q');
      if (row.queued === 'waits') expect(q?.status).toBe('QUEUED');
      if (row.queued === 'cancelled (preempt)') {
        expect(await q?.termination).toMatchObject({ status: 'CANCELLED', cause: 'preempt' });
      }

      const shutdown = runtime.shutdown({ graceMs: 0 });
      await clock.advance(10_000);
      await shutdown;
      expect(runtime.runs.size).toBe(0);
    });
  }
});

describe('interrupt strategies that pile up', () => {
  it('cancelling the second interrupting run keeps the first one’s grace: the active run is still cancelled', async () => {
    const clock = createTestClock();
    const runtime = createRuntime({ clock });
    // `a` ignores interrupts; only the grace cancel ends it.
    const agent = createScriptedAgent<string>();
    const key = { ownerId: 'alice', sessionId: 's' };
    const start = (name: string, strategy: SessionStrategy) => {
      const run = runtime.prepare({
        ...key,
        agent,
        input: name,
        strategy,
        graceMs: 100,
        runId: name,
      });
      run.start();
      return run;
    };
    const a = start('a', 'enqueue');
    await clock.flush();
    const b = start('b', 'interrupt');
    const c = start('c', 'interrupt');
    expect(runtime.session('alice', 's').queuedRunIds).toEqual(['c', 'b']);
    c.cancel();
    await clock.flush();
    await clock.advance(100); // b's grace
    expect(await a.termination).toMatchObject({ status: 'CANCELLED', cause: 'cancel' });
    await clock.flush();
    expect(b.status).toBe('RUNNING');
    agent.complete('b', 'b done');
    expect(await b.result()).toBe('b done');
  });
});
