/**
 * Session admission, the tests numbered 11: different sessions run concurrently, up to
 * maxConcurrentRuns.
 */
import { describe, expect, it } from 'vitest';
import { createTestRuntime, gatedAgent } from '../helpers.js';

describe('session admission', () => {
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
});
