/**
 * What one preempted turn costs runplane, counted rather than timed (issue 15): from a safe point
 * that lands a pending preempt to the next turn's agent starting, the XState macrosteps (events
 * processed, by actor), the actors created, and the heap allocated. Deterministic: the agent
 * reaches its safe point when told, no timer decides anything. The loop inherits the runtime's
 * inspector, so one observer sees the loop, its turns, the session and the run. Run with
 * `node --expose-gc --min-semi-space-size=256 --max-semi-space-size=256 --import tsx
 * bench/turn-steps.bench.ts [turns] [warmup]`: a young generation that large keeps a scavenge
 * out of 200 measured turns, so the heap delta is what they allocated (if one runs anyway, the
 * heap is not reported). CPU time is reported beside it, not gated.
 */
import { performance, PerformanceObserver } from 'node:perf_hooks';
import type { InspectionEvent } from 'xstate';
import {
  CancelMode,
  createRuntime,
  createTurnLoop,
  type Agent,
  type RunContext,
} from '../src/index.js';

interface Running {
  /** The agent reaches a safe point (where the pending preempt lands). */
  safePoint(): void;
}

/** Called as the counted turns begin and once they have run (an allocation profiler, say). */
export interface CountedWindow {
  begin(): void | Promise<void>;
  end(): void | Promise<void>;
}

/**
 * `turns` preempted turns after `warmup` uncounted ones: with `inspected`, the events and actors
 * an inspector sees; without, the heap they allocate (an inspector allocates its own events).
 */
export async function preemptedTurns(
  turns: number,
  warmup: number,
  inspected: boolean,
  window?: CountedWindow,
) {
  let counting = false;
  const events = new Map<string, number>();
  const microsteps = new Map<string, number>();
  let actors = 0;
  const inspect = (event: InspectionEvent) => {
    if (!counting) return;
    if (event.type === '@xstate.actor') actors++;
    if (event.type === '@xstate.event') {
      const key = `${event.event.type}`;
      events.set(key, (events.get(key) ?? 0) + 1);
    }
    if (event.type === '@xstate.microstep') {
      // By machine: the loop, its turn, the session, the run.
      const key = (event.actorRef as unknown as { logic: { id: string } }).logic.id;
      microsteps.set(key, (microsteps.get(key) ?? 0) + 1);
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
              reject(error instanceof Error ? error : new Error(String(error)));
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
  let cpuBefore = process.cpuUsage();
  // A collection inside the counted turns makes the heap delta meaningless: then not reported.
  let measured = { from: Infinity, to: Infinity };
  let collected = 0;
  const collections = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      if (entry.startTime >= measured.from && entry.startTime <= measured.to) collected++;
    }
  });
  collections.observe({ entryTypes: ['gc'] });
  for (let i = 0; i < warmup + turns; i++) {
    if (i === warmup) {
      gc?.();
      heapBefore = process.memoryUsage().heapUsed;
      cpuBefore = process.cpuUsage();
      await window?.begin();
      measured = { from: performance.now(), to: Infinity };
      counting = true;
    }
    next = new Promise<Running>((resolve) => (started = resolve));
    loop.push(i, { preempt: CancelMode.AnySafePoint });
    running.safePoint();
    running = await next;
  }
  const cpu = process.cpuUsage(cpuBefore);
  measured = { ...measured, to: performance.now() };
  await window?.end();
  const cpuMs = (cpu.user + cpu.system) / 1000;
  const allocated = process.memoryUsage().heapUsed - heapBefore;
  counting = false;
  loop.stop({ mode: 'immediate' });
  await loop.wait();
  await runtime.shutdown({ graceMs: 100 });
  collections.disconnect();
  return { events, microsteps, actors, allocated: collected > 0 ? undefined : allocated, cpuMs };
}

/** Per preempted turn: macrosteps by event type, actors created, heap bytes allocated. */
export async function turnSteps(turns: number, warmup: number) {
  const perTurn = (n: number) => +(n / turns).toFixed(2);
  const { events, microsteps, actors } = await preemptedTurns(turns, warmup, true);
  const { allocated, cpuMs } = await preemptedTurns(turns, warmup, false);
  const gc = (globalThis as { gc?: () => void }).gc;
  return {
    turns,
    eventsPerTurn: Object.fromEntries([...events].map(([type, n]) => [type, perTurn(n)])),
    macrostepsPerTurn: perTurn([...events.values()].reduce((a, b) => a + b, 0)),
    /** XState microsteps (transitions taken, eventless ones included), by machine id. */
    microstepsPerTurn: Object.fromEntries([...microsteps].map(([id, n]) => [id, perTurn(n)])),
    microstepsTotalPerTurn: perTurn([...microsteps.values()].reduce((a, b) => a + b, 0)),
    actorsPerTurn: perTurn(actors),
    /** Heap allocated per turn; `undefined` without `--expose-gc` or if a collection ran. */
    heapBytesPerTurn:
      gc === undefined || allocated === undefined ? undefined : Math.round(allocated / turns),
    /** CPU time per turn (user + system): less at the mercy of a busy host than wall time. */
    cpuUsPerTurn: +((cpuMs / turns) * 1000).toFixed(1),
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const [turns = 200, warmup = 2_500] = process.argv.slice(2).map(Number);
  console.log(JSON.stringify(await turnSteps(turns, warmup), null, 2));
}
