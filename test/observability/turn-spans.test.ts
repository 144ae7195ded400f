/**
 * A TurnLoop turn as a span with its run inside, and the preempt → next turn latency (README
 * "Observability"), on a simulated clock.
 */
import { describe, expect, it } from 'vitest';
import { CancelMode } from '../../src/index.js';
import { createOtelRunMetrics } from '../../src/observability/run-metrics.js';
import { createTestLoop, until } from '../turn-loop/helpers.js';
import { createSpanRecorder } from './span-recorder.js';

describe('turn spans', () => {
  it('each turn is a span whose child is its run; a preempt is an event and a latency', async () => {
    const recorder = createSpanRecorder();
    const latencies: number[] = [];
    const { loop, stepped, clock } = createTestLoop(
      {},
      {
        tracer: recorder.tracer,
        metrics: { ...createOtelRunMetrics(), preemptToNextTurn: (ms) => latencies.push(ms) },
      },
    );
    clock.set(Date.UTC(2026, 11, 1));
    loop.push('a');
    loop.run();
    await until(() => stepped.executions.length === 1, 'turn 1 started');
    expect(loop.push('b', { preempt: CancelMode.AnySafePoint }).accepted).toBe(true);
    clock.increment(250);
    stepped.last().safePoint('afterChatModel');
    await until(() => stepped.executions.length === 2, 'turn 2 started');
    stepped.last().finish();
    loop.stop();
    await loop.wait();

    expect(latencies).toEqual([250]);
    const trees = recorder.trees();
    expect(
      trees.map((tree) => [tree.name, tree.events, tree.attributes['runplane.turn.items']]),
    ).toEqual([
      ['runplane.turn', ['runplane.preempted'], 1],
      ['runplane.turn', [], 1],
    ]);
    for (const turn of trees) {
      expect(turn.children).toMatchObject([
        {
          name: 'runplane.run',
          attributes: { 'runplane.run.id': turn.attributes['runplane.run.id'] },
        },
      ]);
    }
    expect(trees.map((turn) => turn.children[0]?.attributes['runplane.run.status'])).toEqual([
      'CANCELLED',
      'COMPLETED',
    ]);
  });
});
