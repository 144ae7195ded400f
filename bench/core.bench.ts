/**
 * Benchmarks of the run lifecycle core (issue 2), measured beside a bare XState machine.
 * Each figure is returned with its target so the runner can print "meets" or "short".
 */
import { createActor, fromPromise, setup } from 'xstate';
import { createMemoryEventLog, createRuntime, sleep, type Agent } from '../src/index.js';

export interface Figure {
  name: string;
  value: number;
  unit: string;
  target: string;
  meets: boolean;
  detail?: Record<string, number>;
}

/**
 * The peer: a bare run machine invoking a promise actor (docs/architecture.md, "The actor tree"'s cost anchor). Its
 * `cancel` event leaves RUNNING, which stops the invoked actor and aborts its signal.
 */
export const bareRunMachine = setup({
  types: {
    context: {} as { input: number },
    input: {} as number,
    events: {} as { type: 'start' } | { type: 'cancel' },
  },
  actors: { agent: fromPromise(({ input }: { input: number }) => Promise.resolve(input)) },
}).createMachine({
  initial: 'CREATED',
  context: ({ input }) => ({ input }),
  states: {
    CREATED: { on: { start: 'RUNNING' } },
    RUNNING: {
      invoke: {
        src: 'agent',
        input: ({ context }) => context.input,
        onDone: 'COMPLETED',
        onError: 'FAILED',
      },
      on: { cancel: 'CANCELLED' },
    },
    COMPLETED: { type: 'final' },
    FAILED: { type: 'final' },
    CANCELLED: { type: 'final' },
  },
});

/** One lifecycle of the bare machine: start → promise resolved → final. */
export function bareLifecycle(i: number): Promise<void> {
  const actor = createActor(bareRunMachine, { input: i });
  const done = new Promise<void>((resolve) => actor.subscribe({ complete: () => resolve() }));
  actor.start();
  actor.send({ type: 'start' });
  return done;
}

export const noop: Agent<number, number> = { execute: (i) => Promise.resolve(i) };

/**
 * n runs queued behind a blocked head in one session; every other one is cancelled while
 * queued, then the head is cancelled and the rest run to completion: wall µs per queued run.
 */
async function queueCost(n: number): Promise<number> {
  const runtime = createRuntime({
    stores: { eventLog: createMemoryEventLog({ maxEventsPerSession: 100 }) },
  });
  const blocked: Agent<number, number> = {
    execute: (i, ctx) => sleep(ctx.clock, 60_000, ctx.signal).then(() => i),
  };
  const head = runtime.prepare({ ownerId: 'bench', sessionId: 'q', agent: blocked, input: -1 });
  head.start();
  const t0 = performance.now();
  const runs = [];
  for (let i = 0; i < n; i++) {
    const run = runtime.prepare({ ownerId: 'bench', sessionId: 'q', agent: noop, input: i });
    run.start();
    runs.push(run);
  }
  for (let i = 1; i < n; i += 2) runs[i]!.cancel();
  head.cancel();
  await Promise.all(runs.map((r) => r.termination));
  const perRunUs = ((performance.now() - t0) * 1_000) / n;
  await runtime.shutdown({ graceMs: 0 });
  return perRunUs;
}

/** Workload 4: per-run cost of a 10,000-run queue ÷ that of a 100-run queue (flat = 1×). */
export async function queueScaling(): Promise<Figure> {
  const rounds = 3;
  const at100: number[] = [];
  const at10k: number[] = [];
  await queueCost(1_000); // warm-up
  for (let r = 0; r < rounds; r++) {
    // Many small queues for n = 100, so both sizes run about as long.
    let sum = 0;
    for (let k = 0; k < 50; k++) sum += await queueCost(100);
    at100.push(sum / 50);
    at10k.push(await queueCost(10_000));
  }
  const small = median(at100);
  const large = median(at10k);
  return {
    name: 'queue of 10,000 (every other cancelled): per-run cost at 10,000 ÷ at 100',
    value: round(large / small),
    unit: '×',
    target: '≤ 1.5×',
    meets: large / small <= 1.5,
    detail: { perRunUsAt100: round(small), perRunUsAt10000: round(large) },
  };
}

function gc(): void {
  const collect = (globalThis as { gc?: () => void }).gc;
  if (!collect) throw new Error('run with node --expose-gc (npm run bench does)');
  collect();
  collect();
}

/** Heap per idle session, and heap retained per finished run after GC. */
export async function memory(): Promise<Figure[]> {
  const sessions = 10_000;
  // Capped log: this measures the runtime, not the event store's retention.
  const runtime = createRuntime({
    stores: { eventLog: createMemoryEventLog({ maxEventsPerSession: 1 }) },
  });
  gc();
  const before = process.memoryUsage().heapUsed;
  const handles = [];
  for (let i = 0; i < sessions; i++) {
    const run = runtime.prepare({
      ownerId: 'bench',
      sessionId: `idle-${i}`,
      agent: noop,
      input: i,
    });
    run.start();
    handles.push(run.termination);
  }
  await Promise.all(handles);
  handles.length = 0;
  gc();
  const perSession = (process.memoryUsage().heapUsed - before) / sessions;

  const runtime2 = createRuntime({
    stores: { eventLog: createMemoryEventLog({ maxEventsPerSession: 1 }) },
  });
  for (let i = 0; i < 200; i++) {
    const run = runtime2.prepare({ ownerId: 'bench', sessionId: 'runs', agent: noop, input: i });
    run.start();
    await run.termination;
  }
  gc();
  const base = process.memoryUsage().heapUsed;
  const runs = 10_000;
  for (let i = 0; i < runs; i++) {
    const run = runtime2.prepare({ ownerId: 'bench', sessionId: 'runs', agent: noop, input: i });
    run.start();
    await run.termination;
  }
  gc();
  const perRun = (process.memoryUsage().heapUsed - base) / runs;
  await runtime.shutdown({ graceMs: 0 });
  await runtime2.shutdown({ graceMs: 0 });
  return [
    {
      name: 'memory per idle session',
      value: round(perSession / 1024),
      unit: 'KiB',
      target: '≤ 8 KiB',
      meets: perSession <= 8 * 1024,
    },
    {
      name: 'heap retained per finished run after GC (10,000 runs)',
      value: Math.round(perRun),
      unit: 'bytes',
      target: '≈ 0 (≤ 64 B: noise)',
      meets: perRun <= 64,
    },
  ];
}

export function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? Number.NaN;
}

export function median(values: number[]): number {
  return percentile(values, 0.5);
}

export function round(value: number): number {
  return Math.round(value * 100) / 100;
}
