/**
 * The steps between a safe point and the next turn (issue 15, "preempt → next turn"): a turn
 * without onAgentEvents spawns no handler and ends in the step its run settles in, and a
 * synchronous genInput / prepareAgent costs no microtask hop of its own.
 */
import type { InspectionEvent } from 'xstate';
import { describe, expect, it } from 'vitest';
import { CancelMode } from '../../src/index.js';
import { createTestLoop, until } from './helpers.js';

/** The ids of the actors created under an inspector, in order. */
function actorsCreated() {
  const ids: string[] = [];
  const inspect = (event: InspectionEvent) => {
    if (event.type === '@xstate.actor') ids.push((event.actorRef as unknown as { id: string }).id);
  };
  return { ids, inspect };
}

/** Turn 1 runs item `a`; `b` preempts it at its next safe point; resolves once turn 2 started. */
async function preemptIntoTurnTwo(
  loop: ReturnType<typeof createTestLoop>['loop'],
  stepped: ReturnType<typeof createTestLoop>['stepped'],
): Promise<void> {
  loop.push('a');
  loop.run();
  await until(() => stepped.executions.length === 1, 'turn 1 started');
  loop.push('b', { preempt: CancelMode.AnySafePoint });
  stepped.last().safePoint('afterToolCalls');
  await until(() => stepped.executions.length === 2, 'turn 2 started');
}

describe('TurnLoop turn steps', () => {
  it("a loop's turns share one actor: no handler without onAgentEvents (one per turn with it), no planning or run-following child", async () => {
    for (const reads of [false, true]) {
      const { ids, inspect } = actorsCreated();
      const { loop, stepped } = createTestLoop({
        inspect,
        ...(reads
          ? {
              onAgentEvents: async (_turn, events) => {
                for await (const event of events) void event;
              },
            }
          : {}),
      });
      await preemptIntoTurnTwo(loop, stepped);
      stepped.last().finish();
      loop.stop();
      const exit = await loop.wait();
      expect(exit.exitReason).toBeUndefined();
      expect(ids.filter((id) => id === 'handler')).toHaveLength(reads ? 2 : 0);
      // Two turns ran (the preempted one and the next), in the loop's one turn actor.
      expect(stepped.executions).toHaveLength(2);
      expect(ids.filter((id) => id === 'turn')).toHaveLength(1);
      // Planning and following the run are the turn's actions, not actors of their own: the
      // only other actor is the loop itself.
      expect(ids.filter((id) => id !== 'turn' && id !== 'handler')).toHaveLength(1);
    }
  });

  it('a synchronous genInput and prepareAgent run in one microtask: no hop between them', async () => {
    let hopped = false;
    const hopsSeen: boolean[] = [];
    const { loop, stepped } = createTestLoop({
      genInput: (items) => {
        hopped = false;
        queueMicrotask(() => (hopped = true));
        return { input: items[0], consumed: items.slice(0, 1), remaining: items.slice(1) };
      },
      prepareAgent: () => {
        hopsSeen.push(hopped);
        return stepped.agent;
      },
    });
    await preemptIntoTurnTwo(loop, stepped);
    expect(hopsSeen).toEqual([false, false]);
    stepped.last().finish();
    loop.stop();
    expect((await loop.wait()).exitReason).toBeUndefined();
  });

  it('a run the runtime refuses to start fails its turn: the loop ends with that error, no turn.started, items back in order', async () => {
    const loopEvents: string[] = [];
    const inspect = (event: InspectionEvent) => {
      if (event.type === '@xstate.event' && event.event.type.startsWith('turn.')) {
        loopEvents.push(event.event.type);
      }
    };
    // An empty item id is refused by runtime.prepare (INVALID_ARGUMENT), after planning.
    const { loop, stepped } = createTestLoop({ inspect, itemIdOf: () => '' });
    loop.push('a');
    loop.push('b');
    loop.run();
    const exit = await loop.wait();
    expect(exit.exitReason).toMatchObject({ code: 'INVALID_ARGUMENT', field: 'itemIds.0' });
    expect(exit.unhandledItems).toEqual(['a', 'b']);
    expect(stepped.executions).toHaveLength(0);
    expect(loopEvents).toContain('turn.failed');
    expect(loopEvents).not.toContain('turn.started');
  });

  it('a preempted turn ends straight into the next: the loop passes no route state between them', async () => {
    const loopStates: unknown[] = [];
    const inspect = (event: InspectionEvent) => {
      if (event.type !== '@xstate.microstep') return;
      const snapshot = event.snapshot as unknown as { machine?: { id: string }; value: unknown };
      if (snapshot.machine?.id === 'turnLoop') loopStates.push(snapshot.value);
    };
    for (const requeuePreempted of [false, true]) {
      loopStates.length = 0;
      const { loop, stepped } = createTestLoop({ inspect, requeuePreempted });
      await preemptIntoTurnTwo(loop, stepped);
      const loopValues = loopStates.map((value) => (value as { loop: unknown }).loop);
      // Once for the first turn (run() routes to it), never between turn 1 and turn 2.
      expect(loopValues.filter((value) => value === 'route')).toHaveLength(1);
      stepped.last().finish();
      loop.stop();
      expect((await loop.wait()).exitReason).toBeUndefined();
    }
  });
});
