/**
 * What one preempted turn costs runplane, counted rather than timed (issue 15): from a safe point
 * that lands a pending preempt to the next turn's agent starting, the XState macrosteps (events
 * processed, by actor), the actors created, and the heap allocated. Deterministic: the agent
 * reaches its safe point when told, no timer decides anything. The loop inherits the runtime's
 * inspector, so one observer sees the loop, its turns, the session and the run. Run with
 * `node --expose-gc --max-semi-space-size=512 --import tsx bench/turn-steps.ts` (the large young
 * generation keeps a scavenge out of the measured turns, so the heap delta is what they allocated).
 */
import type { InspectionEvent } from 'xstate';
import { CancelMode, createRuntime, createTurnLoop, type Agent, type RunContext } from '../src/index.js';

interface Running {
  /** The agent reaches a safe point (where the pending preempt lands). */
  safePoint(): void;
}

/**
 * `turns` preempted turns after `warmup` uncounted ones: with `inspected`, the events and actors
 * an inspector sees; without, the heap they allocate (an inspector allocates its own events).
 */
async function preemptedTurns(turns: number, warmup: number, inspected: boolean) {
  let counting = false;
  const events = new Map<string, number>();
  let actors = 0;
  const inspect = (event: InspectionEvent) => {
    if (!counting) return;
    if (event.type === '@xstate.actor') actors++;
    if (event.type === '@xstate.event') {
      const key = `${event.event.type}`;
      events.set(key, (events.get(key) ?? 0) + 1);
    }
  };
  const runtime = createRuntime(inspected ? { inspect } : {});
  let started: ((r: Running) => void) | undefined;
  const agent: Agent<unknown, string> = {
    execute: (_input, ctx: RunContext) =>
      new Promise<string>((_resolve, reject) => {
        started?.({
          safePoint() {
            try {
              ctx.safePoint('afterToolCalls');
            } catch (error) {
              reject(error as Error);
            }
          },
        });
      }),
  };
  const loop = createTurnLoop<number>({
    runtime,
    ownerId: 'bench',
    sessionId: 'turn-steps',
    genInput: (items) => ({ input: items, consumed: items }),
    prepareAgent: () => agent,
  });
  let next = new Promise<Running>((resolve) => (started = resolve));
  loop.push(-1);
  loop.run();
  let running = await next;
  const gc = (globalThis as { gc?: () => void }).gc;
  let heapBefore = 0;
  for (let i = 0; i < warmup + turns; i++) {
    if (i === warmup) {
      gc?.();
      heapBefore = process.memoryUsage().heapUsed;
      counting = true;
    }
    next = new Promise<Running>((resolve) => (started = resolve));
    loop.push(i, { preempt: CancelMode.AnySafePoint });
    running.safePoint();
    running = await next;
  }
  const allocated = process.memoryUsage().heapUsed - heapBefore;
  counting = false;
  loop.stop({ mode: 'immediate' });
  await loop.wait();
  await runtime.shutdown({ graceMs: 100 });
  return { events, actors, allocated };
}

/** Per preempted turn: macrosteps by event type, actors created, heap bytes allocated. */
export async function turnSteps(turns: number, warmup: number) {
  const perTurn = (n: number) => +(n / turns).toFixed(2);
  const { events, actors } = await preemptedTurns(turns, warmup, true);
  const { allocated } = await preemptedTurns(turns, warmup, false);
  const gc = (globalThis as { gc?: () => void }).gc;
  return {
    turns,
    eventsPerTurn: Object.fromEntries([...events].map(([type, n]) => [type, perTurn(n)])),
    macrostepsPerTurn: perTurn([...events.values()].reduce((a, b) => a + b, 0)),
    actorsPerTurn: perTurn(actors),
    heapBytesPerTurn: gc === undefined ? undefined : Math.round(allocated / turns),
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  console.log(JSON.stringify(await turnSteps(200, 300), null, 2));
}
