/**
 * Item conservation over random push / preempt / stop sequences (issue 3, "stricter than
 * Eino"): every accepted item ends in exactly one of consumed (by a finished or preempted
 * turn), droppedItems, unhandledItems, interruptedItems; every refused item is in
 * takeLateItems(). Time is a SimulatedClock; the agent moves only when the sequence says so.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { CancelMode, createMemoryCheckpointStore, createTurnLoop, sleep } from '../../src/index.js';
import { createTestRuntime, flush, steppedAgent } from './helpers.js';

type Step =
  | { kind: 'push'; preempt?: number; timeoutMs?: number; delayMs?: number; strategy?: boolean }
  | {
      kind: 'stop';
      mode: 'afterTurn' | 'graceful' | 'immediate';
      graceMs?: number;
      idleForMs?: number;
    }
  | { kind: 'tick'; ms: number }
  | { kind: 'safePoint'; at: 'afterChatModel' | 'afterToolCalls' }
  | { kind: 'finish' }
  | { kind: 'fail' };

const safeBits = fc.constantFrom(
  CancelMode.AfterChatModel,
  CancelMode.AfterToolCalls,
  CancelMode.AnySafePoint,
);

const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 6, arbitrary: fc.constant<Step>({ kind: 'push' }) },
  {
    weight: 3,
    arbitrary: fc.record(
      {
        kind: fc.constant('push' as const),
        preempt: safeBits,
        timeoutMs: fc.integer({ min: 0, max: 20 }),
        delayMs: fc.integer({ min: 0, max: 20 }),
      },
      { requiredKeys: ['kind', 'preempt'] },
    ),
  },
  {
    weight: 1,
    arbitrary: fc.constant<Step>({ kind: 'push', strategy: true }),
  },
  {
    weight: 1,
    arbitrary: fc.record(
      {
        kind: fc.constant('stop' as const),
        mode: fc.constantFrom('afterTurn' as const, 'graceful' as const, 'immediate' as const),
        graceMs: fc.integer({ min: 0, max: 20 }),
        idleForMs: fc.integer({ min: 0, max: 20 }),
      },
      { requiredKeys: ['kind', 'mode'] },
    ),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant('tick' as const),
      ms: fc.integer({ min: 0, max: 15 }),
    }),
  },
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant('safePoint' as const),
      at: fc.constantFrom('afterChatModel' as const, 'afterToolCalls' as const),
    }),
  },
  { weight: 3, arbitrary: fc.constant<Step>({ kind: 'finish' }) },
  { weight: 1, arbitrary: fc.constant<Step>({ kind: 'fail' }) },
);

const countIn = (list: readonly number[], item: number) => list.filter((x) => x === item).length;

describe('TurnLoop item conservation (fast-check)', () => {
  it('every accepted item ends in exactly one of consumed, dropped, unhandled, interrupted; every refused item is a late item', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(step, { minLength: 1, maxLength: 40 }),
        fc.boolean(),
        fc.boolean(),
        fc.boolean(),
        async (steps, requeuePreempted, withStore, slowPlanning) => {
          const { runtime, clock } = createTestRuntime();
          const stepped = steppedAgent();
          // Chronological: an item offered again as preemptedItems, or consumed by a turn that ran.
          const history: Array<{ item: number; event: 'reoffered' | 'consumed'; turnId: string }> =
            [];
          const turnsRun: string[] = [];
          const loop = createTurnLoop<number>({
            runtime,
            ownerId: 'u1',
            sessionId: 's1',
            requeuePreempted,
            ...(withStore ? { store: createMemoryCheckpointStore(), checkpointId: 'c' } : {}),
            genInput: async (items, info) => {
              // Slow planning takes 5 ms of clock time, so stops and pushes can land meanwhile.
              if (slowPlanning) await sleep(clock, 5);
              for (const item of info.preemptedItems) {
                history.push({ item, event: 'reoffered', turnId: info.turnId });
              }
              const offered = [...info.preemptedItems, ...items];
              // Consume up to two, drop multiples of 7 among the rest, keep the others.
              const consumed = offered.slice(0, 2);
              const rest = offered.slice(2);
              return {
                input: consumed,
                consumed,
                remaining: rest.filter((item) => item % 7 !== 0),
              };
            },
            prepareAgent: () => stepped.agent,
            onAgentEvents: async (turn, events) => {
              turnsRun.push(turn.turnId);
              for (const item of turn.consumed) {
                history.push({ item, event: 'consumed', turnId: turn.turnId });
              }
              let failed = false;
              for await (const event of events) failed ||= event.type === 'run.failed';
              return failed ? new Error('agent failed') : undefined;
            },
          });
          const accepted: number[] = [];
          const refused: number[] = [];
          let next = 1;
          const push = (item: number, options?: Parameters<typeof loop.push>[1]) => {
            const result = loop.push(item, options);
            (result.accepted ? accepted : refused).push(item);
          };
          loop.run();
          for (const s of steps) {
            const current = stepped.executions.find((e) => !e.done);
            switch (s.kind) {
              case 'push':
                if (s.strategy === true) {
                  push(next++, {
                    strategy: (turn) =>
                      turn !== undefined && turn.consumed.length > 1
                        ? { preempt: CancelMode.AnySafePoint }
                        : undefined,
                  });
                } else if (s.preempt === undefined) {
                  push(next++);
                } else {
                  push(next++, {
                    preempt: s.preempt,
                    ...(s.timeoutMs === undefined ? {} : { preemptTimeoutMs: s.timeoutMs }),
                    ...(s.delayMs === undefined ? {} : { preemptDelayMs: s.delayMs }),
                  });
                }
                break;
              case 'stop':
                loop.stop(
                  // An idle stop takes no mode or grace: no turn runs when it commits.
                  s.idleForMs === undefined
                    ? {
                        mode: s.mode,
                        ...(s.mode === 'graceful' && s.graceMs !== undefined
                          ? { graceMs: s.graceMs }
                          : {}),
                      }
                    : { idleForMs: s.idleForMs },
                );
                break;
              case 'tick':
                clock.increment(s.ms);
                break;
              case 'safePoint':
                current?.safePoint(s.at);
                break;
              case 'finish':
                current?.finish();
                break;
              case 'fail':
                current?.fail(new Error('agent failed'));
                break;
            }
            await flush(3);
          }
          loop.stop({ mode: 'immediate' });
          let exited = false;
          void loop.wait().then(() => (exited = true));
          for (let i = 0; i < 50 && !exited; i++) {
            clock.increment(1_000);
            await flush(3);
          }
          expect(exited).toBe(true);
          const exit = await loop.wait();
          const late = exit.takeLateItems();

          const lastEvent = new Map<number, { event: 'reoffered' | 'consumed'; turnId: string }>();
          for (const entry of history) lastEvent.set(entry.item, entry);
          const lastTurn = turnsRun.at(-1);
          for (const item of accepted) {
            const last = lastEvent.get(item);
            const interrupted = countIn(exit.interruptedItems, item);
            const where = {
              dropped: countIn(exit.droppedItems, item),
              unhandled: countIn(exit.unhandledItems, item),
              interrupted,
              // Consumed for good: its last turn ran and was not the interrupted one.
              consumed: last?.event === 'consumed' && interrupted === 0 ? 1 : 0,
              late: countIn(late, item),
            };
            const total = where.dropped + where.unhandled + where.interrupted + where.consumed;
            expect({ item, ...where, total }).toEqual({ item, ...where, late: 0, total: 1 });
            if (interrupted > 0) {
              // Interrupted items were consumed by the last turn that ran.
              expect(last).toMatchObject({ event: 'consumed', turnId: lastTurn });
            }
          }
          for (const item of refused) {
            expect(countIn(late, item)).toBe(1);
            expect(countIn(exit.unhandledItems as number[], item)).toBe(0);
            expect(lastEvent.has(item)).toBe(false);
          }
          expect(late).toHaveLength(refused.length);
        },
      ),
      { numRuns: 300 },
    );
  });
});
