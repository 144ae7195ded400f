/**
 * Loops in the timeline: a TurnLoop inherits its runtime's `inspect`, so a recorded trace of a
 * running loop has a loop lane (under its session) with its turns, pushes, preempts, stops and
 * checkpoints, beside the lanes of the turns' runs.
 */
import { describe, expect, it } from 'vitest';
import {
  CancelMode,
  createMemoryCheckpointStore,
  createTurnLoop,
  parseTimelineTrace,
} from '../../src/index.js';
import { createRecordedRuntime, pathOf, steppingAgent } from './timeline-helpers.js';

describe('a TurnLoop in a recorded timeline', () => {
  it('has a loop lane with its turns, pushes, preempts, stops and checkpoints', async () => {
    const { runtime, advance, trace, reported } = createRecordedRuntime();
    const store = createMemoryCheckpointStore();
    const loop = createTurnLoop<string>({
      runtime,
      ownerId: 'alice',
      sessionId: 'chat-1',
      store,
      checkpointId: 'loop-1',
      genInput: (items) => ({
        input: items[0],
        consumed: items.slice(0, 1),
        remaining: items.slice(1),
      }),
      prepareAgent: () => steppingAgent(3, 100),
    });
    loop.push('a');
    loop.run();
    await advance(50);
    loop.push('urgent', { preempt: CancelMode.AnySafePoint });
    await advance(120); // turn 1 reaches its safe point at 100 ms: preempted; turn 2 runs
    loop.push('later');
    loop.stop({ mode: 'immediate', cause: 'deploy' });
    await advance(50);
    const exit = await loop.wait();
    expect(exit.unhandledItems).toEqual(['later']);
    expect(exit.checkpointAttempted).toBe(true);

    // Written to a trace file and read back, as `runplane timeline` would.
    const transitions = parseTimelineTrace(trace());
    const lane = transitions.filter((t) => t.actor === 'turn-loop');
    expect(lane[0]).toMatchObject({ id: 'loop-1', parentId: 'alice/chat-1', from: null });
    expect(
      pathOf(transitions, 'loop-1').map(([, from, to, event, cause]) => [from, to, event, cause]),
    ).toEqual([
      [null, 'idle', 'xstate.init', null],
      ['idle', 'idle', 'loop.push', 'push'],
      ['idle', 'loading', 'loop.run', null],
      ['loading', 'turn-1.planning', 'xstate.done.actor.loadCheckpoint', null],
      ['turn-1.planning', 'turn-1.running', 'turn.started', null],
      ['turn-1.running', 'turn-1.running', 'loop.push', 'preempt'],
      ['turn-1.running', 'turn-2.planning', 'turn.ended', 'preempt'],
      ['turn-2.planning', 'turn-2.running', 'turn.started', null],
      ['turn-2.running', 'turn-2.running', 'loop.push', 'push'],
      ['turn-2.running', 'turn-2.running', 'loop.stop', 'deploy'],
      ['turn-2.running', 'exiting.saving', 'turn.ended', 'stop'],
      ['exiting.saving', 'exited', 'xstate.done.actor.saveCheckpoint', 'checkpoint'],
    ]);
    // The turns' runs are in the trace too, under the same session.
    const runs = transitions.filter((t) => t.actor === 'run' && t.from === null);
    expect(runs).toHaveLength(2);
    expect(runs.every((t) => t.parentId === 'alice/chat-1')).toBe(true);
    expect(reported).toEqual([]);
  });
});
