/**
 * Benchmarks of the run lifecycle core (issue 2), measured beside a bare XState machine.
 * Each figure is returned with its target so the runner can print "meets" or "short".
 */
import { createActor, fromPromise, setup } from 'xstate';
import { performance } from 'node:perf_hooks';
import { createMemoryEventLog, createRuntime, type Agent, type Runtime } from '../src/index.js';

export interface Figure {
  name: string;
  value: number;
  unit: string;
  target: string;
  meets: boolean;
  detail?: Record<string, number>;
}

/**
 * The peer: a bare run machine invoking a promise actor (the cost anchor of the README's
 * Performance section). Its `cancel` event leaves RUNNING, which stops the invoked actor and aborts its signal.
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
 * Per-run wall µs of `runs` runs (rounded up to whole batches) in the session `sessionId`, in
 * batches of n: each batch prepares n runs, starts them all (one runs, n − 1 wait their turn) and
 * awaits every run's termination before the next batch. So a run's cost is its prepare, its start
 * and its whole lifecycle until settled, spawn and stop of its actor included.
 */
async function sessionBatchCost(
  runtime: Runtime,
  sessionId: string,
  n: number,
  runs: number,
): Promise<number> {
  const batches = Math.ceil(runs / n);
  const terminations: Array<Promise<unknown>> = [];
  const t0 = performance.now();
  for (let b = 0; b < batches; b++) {
    for (let i = 0; i < n; i++) {
      const run = runtime.prepare({ ownerId: 'bench', sessionId, agent: noop, input: i });
      run.start();
      terminations.push(run.termination);
    }
    await Promise.all(terminations);
    terminations.length = 0;
  }
  return ((performance.now() - t0) * 1_000) / (batches * n);
}

/** Batch sizes of the per-session cost curve: runs waiting in one session at once. */
export const sessionCurveSizes = [1, 10, 32, 100] as const;

/**
 * Workload 4, the per-session cost curve: per-run cost (prepare + start + lifecycle until
 * settled) with 1, 10, 32 and 100 runs waiting in one session, as ratios to the cost with 1.
 *
 * @remarks One runtime and one session, kept live, so the curve shows what the session's depth
 * costs, not its creation. Every pass runs about 600 runs of each size (a fraction of a second),
 * the sizes in a rotating order, and takes each size's ratio to size 1 within the pass; the figure
 * is the median ratio over passes, so the host's drift falls on both sides of a ratio alike.
 */
export async function sessionCostCurve(passes = 25, runsPerPass = 600): Promise<Figure[]> {
  // A capped log: the store's own retention is not what this measures. The cap on a session's
  // runs is lifted: the curve is what the default cap is chosen from.
  const runtime = createRuntime({
    stores: { eventLog: createMemoryEventLog({ maxEventsPerSession: 1_000 }) },
    maxQueuedRuns: Math.max(...sessionCurveSizes),
  });
  const sizes = sessionCurveSizes;
  for (const n of sizes) await sessionBatchCost(runtime, 'curve', n, 3 * runsPerPass); // warm-up
  const perRunUs = new Map<number, number[]>(sizes.map((n) => [n, []]));
  const ratios = new Map<number, number[]>(sizes.map((n) => [n, []]));
  for (let pass = 0; pass < passes; pass++) {
    const inPass = new Map<number, number>();
    for (let k = 0; k < sizes.length; k++) {
      const n = sizes[(pass + k) % sizes.length]!;
      inPass.set(n, await sessionBatchCost(runtime, 'curve', n, runsPerPass));
    }
    for (const n of sizes) {
      perRunUs.get(n)!.push(inPass.get(n)!);
      ratios.get(n)!.push(inPass.get(n)! / inPass.get(1)!);
    }
  }
  await runtime.shutdown({ graceMs: 0 });
  const at1 = median(perRunUs.get(1)!);
  return sizes
    .filter((n) => n > 1)
    .map((n) => {
      const ratio = median(ratios.get(n)!);
      return {
        name: `per-session cost: per-run cost with ${n} runs waiting in one session ÷ with 1`,
        value: round(ratio),
        unit: '×',
        target: 'reported (≤ 1.5×: flat)',
        meets: ratio <= 1.5,
        detail: { perRunUs: round(median(perRunUs.get(n)!)), perRunUsWith1: round(at1), passes },
      };
    });
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

/** `BENCH_HEAP_SESSIONS` (a positive integer, for quick checks), else 100,000. */
function heapSessionsFromEnv(): number {
  const raw = process.env.BENCH_HEAP_SESSIONS;
  if (raw === undefined || raw === '') return 100_000;
  const sessions = Number(raw);
  if (!Number.isSafeInteger(sessions) || sessions < 1) {
    throw new Error(`expected BENCH_HEAP_SESSIONS to be a positive integer, got ${raw}`);
  }
  return sessions;
}

const mib = (bytes: number): number => round(bytes / 1024 / 1024);

/**
 * Workload 7: the heap after GC following 10 runs in each of `sessions` sessions (1,000,000 runs
 * over 100,000 by default; `BENCH_HEAP_SESSIONS` sets fewer), with default `createRuntime()`
 * options: the in-memory event log keeps every event, and an idle session actor lives for
 * `sessionIdleTtlMs` (60 s).
 *
 * @remarks Ten passes, each one no-op run in every session, 1,000 sessions at a time: every
 * session is touched in the last pass, so all of them are still live (within their idle TTL)
 * when the heap is measured, as long as that pass takes under 60 s (`lastPassS` in the detail).
 * The baseline is taken after GC before the runtime is created.
 */
export async function heapAfterManyRuns(sessions = heapSessionsFromEnv()): Promise<Figure[]> {
  const runsPerSession = 10;
  const concurrency = 1_000;
  gc();
  const before = process.memoryUsage().heapUsed;
  const runtime = createRuntime();
  const t0 = performance.now();
  let lastPassStart = t0;
  for (let pass = 0; pass < runsPerSession; pass++) {
    lastPassStart = performance.now();
    for (let first = 0; first < sessions; first += concurrency) {
      const terminations: Array<Promise<unknown>> = [];
      for (let s = first; s < Math.min(first + concurrency, sessions); s++) {
        const run = runtime.prepare({
          ownerId: 'bench',
          sessionId: `heap-${s}`,
          agent: noop,
          input: pass,
        });
        run.start();
        terminations.push(run.termination);
      }
      await Promise.all(terminations);
    }
  }
  const elapsedS = (performance.now() - t0) / 1_000;
  const lastPassS = (performance.now() - lastPassStart) / 1_000;
  gc();
  const after = process.memoryUsage().heapUsed;
  const liveRuns = runtime.runs.size;
  await runtime.shutdown({ graceMs: 0 });
  gc();
  const afterShutdown = process.memoryUsage().heapUsed;
  const runs = sessions * runsPerSession;
  const perSession = (after - before) / sessions;
  const size = `${runs.toLocaleString('en-US')} runs over ${sessions.toLocaleString('en-US')} sessions`;
  return [
    {
      name: `heap after GC following ${size}, default createRuntime()`,
      value: mib(after),
      unit: 'MiB',
      target: 'none (reported)',
      meets: true,
      detail: {
        heapBeforeMiB: mib(before),
        heapAfterShutdownMiB: mib(afterShutdown),
        liveRuns,
        runsPerSecond: Math.round(runs / elapsedS),
        lastPassS: round(lastPassS),
      },
    },
    {
      name: `heap growth per session after GC (${size}, default createRuntime())`,
      value: round(perSession / 1024),
      unit: 'KiB',
      target: 'none (reported)',
      meets: true,
      detail: { bytesPerRun: Math.round((after - before) / runs) },
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
