/**
 * Run spans through `@opentelemetry/api` (README "Observability"): the span tree of a run that
 * spawns a nested run and is cancelled at a safe point with escalation, on a simulated clock.
 */
import { describe, expect, it } from 'vitest';
import { CancelMode, createRuntime, type Agent } from '../../src/index.js';
import { createTestClock } from '../../src/testing/index.js';
import { createSpanRecorder } from './span-recorder.js';

describe('run spans', () => {
  it('a nested run is a child of its parent run; a safe-point cancel that escalates is on the span', async () => {
    const recorder = createSpanRecorder();
    const clock = createTestClock(1_000);
    const runtime = createRuntime({ clock, tracer: recorder.tracer, reportError: () => {} });
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    // Ignores nothing: it ends when its signal fires.
    const waiting: Agent<null, string> = {
      execute: (_input, ctx) =>
        new Promise((_resolve, reject) =>
          ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason), { once: true }),
        ),
    };
    const parent = runtime.prepare({
      ownerId: 'u1',
      sessionId: 's1',
      input: null,
      agent: {
        async execute(_input, ctx) {
          const nested = ctx.spawn(waiting, null);
          await released;
          // Not the safe point the cancel waits for: the deadline escalates it.
          ctx.safePoint('afterChatModel');
          return nested.result();
        },
      } satisfies Agent<null, string>,
    });
    parent.start();
    await clock.flush();
    const cancel = parent.cancel({
      mode: CancelMode.AfterToolCalls,
      timeoutMs: 500,
      reason: 'enough',
    });
    release();
    await clock.flush();
    expect(parent.status).toBe('RUNNING');
    await clock.advance(500);
    expect(await cancel.outcome).toBe('escalated');
    await parent.termination;
    await clock.flush();

    const trees = recorder.trees();
    expect(trees).toHaveLength(1);
    const [run] = trees;
    expect(run).toMatchObject({
      name: 'runplane.run',
      attributes: {
        'runplane.run.id': parent.id,
        'runplane.session.id': 's1',
        'runplane.run.status': 'CANCELLED',
        'runplane.run.cancel_cause': 'cancel',
        'runplane.run.escalated': true,
        'runplane.run.queue_wait_ms': 0,
      },
      events: ['runplane.cancel_requested', 'runplane.safe_point'],
    });
    expect(run?.children).toHaveLength(1);
    expect(run?.children[0]).toMatchObject({
      name: 'runplane.run',
      attributes: {
        'runplane.run.parent_id': parent.id,
        'runplane.run.status': 'CANCELLED',
        'runplane.run.cancel_cause': 'cancel',
        'runplane.run.escalated': false,
      },
      children: [],
    });
    // Times come from the runtime's clock: the run span lasts from prepare to settled.
    const parentSpan = recorder
      .spans()
      .find((span) => span.attributes['runplane.run.id'] === parent.id);
    expect(parentSpan?.duration).toEqual([0, 500_000_000]);
  });

  it('records nothing and keeps nothing without a tracer provider', async () => {
    const runtime = createRuntime({ clock: createTestClock(), reportError: () => {} });
    const run = runtime.prepare({
      ownerId: 'u1',
      sessionId: 's1',
      input: 1,
      agent: { execute: async () => 2 },
    });
    run.start();
    expect(await run.result()).toBe(2);
  });
});
