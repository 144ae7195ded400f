/**
 * The critical path of a preempt (issue 15), step by step: from the safe point where a pending
 * preempt lands to the next turn's agent `execute` being called. Deterministic like
 * bench/turn-steps.bench.ts (the agent reaches its safe point when told), after `warmup`
 * uncounted preempted turns. Three modes:
 *
 * - `steps`: the XState steps on the path in order (nested ones indented: taken inside the outer
 *   step), and per step the heap it allocated, exclusive of nested steps (run with a 256 MiB young
 *   generation so no scavenge falls inside the counted turns, as turn-steps does);
 * - `time`: the same steps' wall time, exclusive and inclusive, and the whole path's;
 * - `hops`: the promises created and the microtask jobs run on the path (`async_hooks`, which
 *   slows promises: its timings are not reported).
 *
 * Run with `node --expose-gc --min-semi-space-size=256 --max-semi-space-size=256 --import tsx
 * bench/turn-path.ts [steps|time|hops] [turns] [warmup]`. Never part of `npm test`.
 */
import { createHook } from 'node:async_hooks';
import { PerformanceObserver } from 'node:perf_hooks';
import { StateMachine } from 'xstate';

const [mode = 'steps', turnsArg = '500', warmupArg = '2500'] = process.argv.slice(2);
if (mode !== 'steps' && mode !== 'time' && mode !== 'hops') {
  throw new Error(`expected mode to be steps, time or hops, got ${mode}`);
}
const turns = Number(turnsArg);
const warmup = Number(warmupArg);

/** Whether the path is being counted: from the safe point until the next agent starts. */
let counting = false;
const heapUsed = () => (mode === 'steps' ? process.memoryUsage().heapUsed : 0);

type Step = (this: { id: string }, ...args: unknown[]) => unknown;
interface StepSum {
  ms: number;
  inclusiveMs: number;
  bytes: number;
  steps: number;
}
const sums = new Map<string, StepSum>();
const open: { at: number; heap: number; nestedMs: number; nestedBytes: number }[] = [];
let sequence: string[] = [];

/** Wraps a machine's step to time it and weigh its heap (before any machine is built). */
const wrap = (step: Step, eventOf: (args: unknown[]) => string): Step =>
  function (this: { id: string }, ...args: unknown[]) {
    if (!counting || mode === 'hops') return step.apply(this, args);
    const frame = { at: performance.now(), heap: heapUsed(), nestedMs: 0, nestedBytes: 0 };
    const key = `${this.id} ${eventOf(args)}`;
    sequence.push(`${'  '.repeat(open.length)}${key}`);
    open.push(frame);
    try {
      return step.apply(this, args);
    } finally {
      open.pop();
      const ms = performance.now() - frame.at;
      const bytes = heapUsed() - frame.heap;
      const sum = sums.get(key) ?? { ms: 0, inclusiveMs: 0, bytes: 0, steps: 0 };
      sums.set(key, {
        ms: sum.ms + ms - frame.nestedMs,
        inclusiveMs: sum.inclusiveMs + ms,
        bytes: sum.bytes + bytes - frame.nestedBytes,
        steps: sum.steps + 1,
      });
      const outer = open[open.length - 1];
      if (outer !== undefined) {
        outer.nestedMs += ms;
        outer.nestedBytes += bytes;
      }
    }
  };
const proto = StateMachine.prototype as unknown as Record<
  'transition' | 'getInitialSnapshot',
  Step
>;
proto.transition = wrap(proto.transition, (args) => (args[1] as { type: string }).type);
proto.getInitialSnapshot = wrap(proto.getInitialSnapshot, () => '(initial state)');

/** Collections that ran inside the counted path: a step's heap delta is then not its own. */
let collections = 0;
new PerformanceObserver((list) => {
  if (counting) collections += list.getEntries().length;
}).observe({ entryTypes: ['gc'] });

let promises = 0;
let jobs = 0;
if (mode === 'hops') {
  createHook({
    init(_id, type) {
      if (counting && type === 'PROMISE') promises++;
    },
    before() {
      if (counting) jobs++;
    },
  }).enable();
}

// Imported after the wrap: the machines are built as their modules load.
const { CancelMode, createRuntime, createTurnLoop } = await import('../src/index.js');
const runtime = createRuntime();
let started: ((safePoint: () => void) => void) | undefined;
let pathMs = 0;
let countedAt = 0;
const loop = createTurnLoop<number>({
  runtime,
  ownerId: 'bench',
  sessionId: 'turn-path',
  genInput: (items) => ({ input: items, consumed: items }),
  prepareAgent: () => ({
    execute: (_input, ctx) => {
      if (counting) {
        pathMs += performance.now() - countedAt;
        counting = false;
      }
      return new Promise<string>((_resolve, reject) =>
        started?.(() => {
          try {
            ctx.safePoint('afterToolCalls');
          } catch (error) {
            reject(error instanceof Error ? error : new Error(String(error)));
          }
        }),
      );
    },
  }),
});
let next = new Promise<() => void>((resolve) => (started = resolve));
loop.push(-1);
loop.run();
let safePoint = await next;
let firstSequence: string[] = [];
for (let i = 0; i < warmup + turns; i++) {
  next = new Promise((resolve) => (started = resolve));
  loop.push(i, { preempt: CancelMode.AnySafePoint });
  // A full collection first: the counted turns then start with an empty young generation.
  if (i === warmup) (globalThis as { gc?: () => void }).gc?.();
  if (i >= warmup) {
    sequence = [];
    countedAt = performance.now();
    counting = true;
  }
  safePoint(); // the pending preempt lands here
  safePoint = await next;
  if (i === warmup) firstSequence = sequence;
}
loop.stop({ mode: 'immediate' });
await loop.wait();
await runtime.shutdown({ graceMs: 100 });

const per = (n: number, digits = 1) => +(n / turns).toFixed(digits);
if (mode === 'hops') {
  console.log(JSON.stringify({ turns, promisesPerTurn: per(promises), jobsPerTurn: per(jobs) }));
} else {
  const rows = [...sums].sort((a, b) => (mode === 'time' ? b[1].ms - a[1].ms : 0));
  console.log(
    JSON.stringify(
      {
        turns,
        collections,
        sequence: firstSequence,
        ...(mode === 'time'
          ? {
              pathUs: per(pathMs * 1000),
              stepsUs: per(rows.reduce((n, [, s]) => n + s.ms, 0) * 1000),
            }
          : {
              stepBytes: per(
                rows.reduce((n, [, s]) => n + s.bytes, 0),
                0,
              ),
            }),
        bySteps: Object.fromEntries(
          rows.map(([key, s]) => [
            key,
            mode === 'time'
              ? {
                  us: per(s.ms * 1000),
                  inclusiveUs: per(s.inclusiveMs * 1000),
                  steps: per(s.steps),
                }
              : { bytes: per(s.bytes, 0), steps: per(s.steps) },
          ]),
        ),
      },
      null,
      2,
    ),
  );
}
