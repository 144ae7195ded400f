/**
 * Run lifecycle, the tests numbered 10: a run's event log, replayed and followed with events()
 * and owned by stream(); one terminal event per run; no event after it.
 */
import { describe, expect, it } from 'vitest';
import { CancelMode, type RunplaneEvent } from '../../src/index.js';
import { createTestRuntime, gatedAgent, owner, tick } from '../helpers.js';

describe('run lifecycle', () => {
  it('10. events({ after }) replays from any seq, follows live, and leaving early never cancels', async () => {
    const { runtime } = createTestRuntime();
    const gate = gatedAgent();
    const run = runtime.prepare({ ...owner, agent: gate.agent, input: 'a' });
    run.start();
    await gate.started(run.id);
    gate.ctx(run.id).emit('agent.message', { text: 'one' });

    // Leave early: the run goes on.
    for await (const event of run.events()) {
      expect(event.runId).toBe(run.id);
      break;
    }
    expect(run.status).toBe('RUNNING');

    const all: RunplaneEvent[] = [];
    const follower = (async () => {
      for await (const event of run.events()) all.push(event);
    })();
    await tick();
    gate.ctx(run.id).emit('agent.message', { text: 'two' });
    gate.complete(run.id, 'done');
    await follower;
    expect(all.map((e) => e.type)).toEqual([
      'session.run_queued',
      'run.status',
      'session.run_started',
      'run.status',
      'agent.message',
      'agent.message',
      'run.status',
      'run.completed',
    ]);
    const seqs = all.map((e) => e.seq);
    expect(seqs).toEqual([...seqs].sort((x, y) => x - y));

    const fromMiddle: RunplaneEvent[] = [];
    const cursor = all[4]?.seq ?? 0;
    for await (const event of run.events({ after: cursor })) fromMiddle.push(event);
    expect(fromMiddle).toEqual(all.slice(5));
  });

  it('10. stream() owns the run: leaving early cancels it; a second stream() throws', async () => {
    const { runtime } = createTestRuntime();
    const gate = gatedAgent();
    const run = runtime.prepare({ ...owner, agent: gate.agent, input: 'a' });
    const types: string[] = [];
    for await (const event of run.stream()) {
      types.push(event.type);
      if (event.type === 'session.run_started') break;
    }
    expect(run.status).toBe('CANCELLED');
    expect(await run.termination).toMatchObject({ status: 'CANCELLED', reason: 'stream closed' });
    expect(() => run.stream()).toThrow(expect.objectContaining({ code: 'RUN_ALREADY_STARTED' }));
  });

  it('10. every run logs exactly one terminal event', async () => {
    const { runtime, clock } = createTestRuntime();
    const gate = gatedAgent();
    const runs = [0, 1, 2, 3, 4].map((i) =>
      runtime.prepare({
        ...owner,
        agent: gate.agent,
        input: i,
        timeoutMs: i === 4 ? 10 : undefined,
      }),
    );
    runs[0]?.cancel(); // CREATED → CANCELLED
    for (const run of runs.slice(1)) run.start();
    await gate.started(runs[1]?.id ?? '');
    runs[1]?.cancel({ mode: CancelMode.AnySafePoint });
    runs[1]?.cancel(); // escalation: still one terminal event
    await runs[1]?.termination;
    await gate.started(runs[2]?.id ?? '');
    gate.complete(runs[2]?.id ?? '', 'ok');
    await gate.started(runs[3]?.id ?? '');
    gate.fail(runs[3]?.id ?? '', new Error('boom'));
    await runs[3]?.termination;
    clock.increment(10);
    await Promise.all(runs.map((r) => r.termination));
    const terminalTypes = ['run.completed', 'run.failed', 'run.cancelled'];
    const events = await runtime.eventLog.read({}, owner, { types: terminalTypes });
    for (const run of runs) {
      expect(events.filter((e) => e.runId === run.id)).toHaveLength(1);
    }
    expect(events.map((e) => e.type)).toEqual([
      'run.cancelled',
      'run.cancelled',
      'run.completed',
      'run.failed',
      'run.cancelled',
    ]);
  });

  it('emit after the run is terminal is dropped (fenced)', async () => {
    const { runtime } = createTestRuntime({ unwindTimeoutMs: 100 });
    const gate = gatedAgent({ honoursSignal: false });
    const run = runtime.prepare({ ...owner, agent: gate.agent, input: 'x' });
    run.start();
    await gate.started(run.id);
    run.cancel();
    gate.ctx(run.id).emit('agent.message', { text: 'too late' });
    gate.complete(run.id, 'late');
    await run.termination;
    const events = await runtime.eventLog.read({}, owner, {
      runId: run.id,
      types: ['agent.message'],
    });
    expect(events).toEqual([]);
  });
});
