/**
 * What one no-op run costs runplane, counted rather than timed (issue 13's speed target), beside
 * the bare XState machine doing the same run: the lifecycle workload of side-by-side.bench.ts
 * (prepare → start → termination, a new session every 10 runs), per run:
 * - XState macrosteps (events processed) and microsteps, by actor (session, run, other);
 * - actions executed (custom and built-in, by type) and assigns resolved (by name; the
 *   `updateContext` ones of machines/context-update.ts listed beside them);
 * - actors created, promises and other async resources created, timers armed, events logged;
 * - heap bytes allocated (in all, and runplane's by phase: prepare, start, to settled), and CPU
 *   time.
 *
 * @remarks Two passes over fresh runtimes. The counted pass sees XState's inspection events,
 * wraps the machines' named assign/enqueueActions actions to count them (they never reach the
 * inspector), and counts async resources with an `async_hooks` init hook. The allocation pass
 * has none of that: rounds of `runsPerRound` runs, runplane's and bare XState's alternating,
 * each after a full GC, the heap delta over a round divided by its runs; a young generation of
 * 256 MiB (`--min/max-semi-space-size=256`, set by bench/run.ts for this suite) holds a round's
 * garbage, and a round in which a collection ran anyway is dropped. Bytes are the median over
 * rounds; CPU time is reported beside them, with runplane ÷ bare per round pair. Run alone with
 * `node --expose-gc --min-semi-space-size=256 --max-semi-space-size=256 --import tsx
 * bench/run-steps.bench.ts [runs]`.
 *
 * @module
 */
import { createHook } from 'node:async_hooks';
import { performance, PerformanceObserver } from 'node:perf_hooks';
import { createActor, type InspectionEvent } from 'xstate';
import { runMachine } from '../machines/run.machine.js';
import { sessionMachine } from '../machines/session.machine.js';
import {
  createMemoryEventLog,
  createRuntime,
  systemClock,
  type Clock,
  type EventLog,
} from '../src/index.js';
import { bareRunMachine, median, noop, round, type Figure } from './core.bench.js';

/** One lifecycle: resolves once the run has settled. */
type Lifecycle = (i: number) => Promise<unknown>;

/** What a counted pass needs to hook into: an inspector, a clock, an event log. */
interface Hooks {
  inspect?: (event: InspectionEvent) => void;
  clock?: Clock;
  eventLog?: EventLog;
}

interface Peer {
  lifecycle: Lifecycle;
  close(): Promise<void>;
}

/** runplane as the lifecycle workload uses it (bench/peers.ts): a new session every 10 runs. */
function runplanePeer(hooks: Hooks = {}): Peer {
  const runtime = createRuntime({
    stores: { eventLog: hooks.eventLog ?? createMemoryEventLog({ maxEventsPerSession: 1_000 }) },
    ...(hooks.clock === undefined ? {} : { clock: hooks.clock }),
    ...(hooks.inspect === undefined ? {} : { inspect: hooks.inspect }),
  });
  return {
    lifecycle(i) {
      const run = runtime.prepare({
        ownerId: 'bench',
        sessionId: `seq-${Math.floor(i / 10)}`,
        agent: noop,
        input: i,
      });
      run.start();
      return run.termination;
    },
    close: async () => {
      await runtime.shutdown({ graceMs: 0 });
    },
  };
}

/** The bare machine's lifecycle (core.bench.ts `bareLifecycle`), with an inspector. */
function barePeer(hooks: Hooks = {}): Peer {
  const inspect = hooks.inspect;
  return {
    lifecycle(i) {
      const actor = createActor(
        bareRunMachine,
        inspect === undefined ? { input: i } : { input: i, inspect },
      );
      const done = new Promise<void>((resolve) => actor.subscribe({ complete: () => resolve() }));
      actor.start();
      actor.send({ type: 'start' });
      return done;
    },
    close: () => Promise.resolve(),
  };
}

/** A counter by key. */
class Tally {
  readonly counts = new Map<string, number>();
  add(key: string, n = 1): void {
    this.counts.set(key, (this.counts.get(key) ?? 0) + n);
  }
  get total(): number {
    let sum = 0;
    for (const n of this.counts.values()) sum += n;
    return sum;
  }
  perRun(runs: number): Record<string, number> {
    return Object.fromEntries(
      [...this.counts].sort(([a], [b]) => a.localeCompare(b)).map(([k, n]) => [k, round(n / runs)]),
    );
  }
}

/** The actor's kind: its machine's id (`session`, `run`, `(machine)` for the bare one), else `actor`. */
const kindOf = (actorRef: unknown): string => {
  const logic = (actorRef as { logic?: { id?: unknown } }).logic ?? {};
  return typeof logic.id === 'string' ? logic.id : 'actor';
};

/** `xstate.done.actor.c0` → `xstate.done.actor.*`: child ids are not the point. */
const eventKind = (type: string): string =>
  type.startsWith('xstate.done.actor.')
    ? 'xstate.done.actor.*'
    : type.startsWith('xstate.error.actor.')
      ? 'xstate.error.actor.*'
      : type;

/** A named built-in action (assign, enqueueActions, sendTo, …): a function with `resolve`. */
type BuiltinAction = ((...args: unknown[]) => unknown) & {
  type: string;
  resolve: (...args: unknown[]) => unknown;
};

/**
 * The built-ins counted, by kind: XState's `assign` (which rebuilds the snapshot) and
 * `enqueueActions`, and machines/context-update.ts's `updateContext` (which sets context fields
 * as `assign` does, keeping the snapshot's state value and tags).
 */
const builtinKinds: Readonly<Record<string, string>> = {
  'xstate.assign': 'assign',
  'xstate.enqueueActions': 'enqueueActions',
  'runplane.updateContext': 'updateContext',
};

const isBuiltin = (action: unknown): action is BuiltinAction =>
  typeof action === 'function' && 'resolve' in action && 'type' in action;

/**
 * Wraps every named `assign` and `enqueueActions` of the run and session machines so that each
 * resolution while `counting()` is counted (they run inside XState's transition, unseen by the inspector). Machines
 * provided after this call carry the wrappers. @returns a function that puts the originals back
 */
function countBuiltins(into: Tally, counting: () => boolean): () => void {
  const restores: Array<() => void> = [];
  for (const machine of [runMachine, sessionMachine]) {
    const actions = machine.implementations.actions as Record<string, unknown>;
    for (const [name, action] of Object.entries(actions)) {
      if (!isBuiltin(action)) continue;
      const kind = builtinKinds[action.type];
      if (kind === undefined) continue;
      const key = `${machine.id}.${kind}.${name}`;
      const original = action.resolve;
      const wrapped = Object.assign(function counted() {}, action, {
        // Fixed arity: XState passes six arguments; no rest array allocated per call.
        resolve(a: unknown, b: unknown, c: unknown, d: unknown, e: unknown, f: unknown) {
          if (counting()) into.add(key);
          return original(a, b, c, d, e, f);
        },
      });
      actions[name] = wrapped;
      restores.push(() => (actions[name] = action));
    }
  }
  return () => {
    for (const restore of restores) restore();
  };
}

/** Counts of one peer over `runs` counted runs after `warmup` uncounted ones. */
async function countedPass(make: (hooks: Hooks) => Peer, runs: number, warmup: number) {
  let counting = false;
  const macrosteps = new Tally();
  const microsteps = new Tally();
  const actions = new Tally();
  const actors = new Tally();
  const builtins = new Tally();
  const asyncResources = new Tally();
  const timers = new Tally();
  const logged = new Tally();
  const inspect = (event: InspectionEvent) => {
    if (!counting) return;
    const kind = kindOf(event.actorRef);
    if (event.type === '@xstate.event') macrosteps.add(`${kind}: ${eventKind(event.event.type)}`);
    else if (event.type === '@xstate.microstep') microsteps.add(kind);
    else if (event.type === '@xstate.action') actions.add(`${kind}: ${event.action.type}`);
    else if (event.type === '@xstate.actor') actors.add(kind);
  };
  const clock: Clock = {
    now: () => systemClock.now(),
    setTimeout: (fn, ms) => {
      if (counting) timers.add('setTimeout');
      return systemClock.setTimeout(fn, ms);
    },
    clearTimeout: (handle) => {
      if (counting) timers.add('clearTimeout');
      systemClock.clearTimeout(handle);
    },
  };
  const log = createMemoryEventLog({ maxEventsPerSession: 1_000 });
  const append = log.append.bind(log);
  log.append = (ctx, key, event) => {
    if (counting) logged.add(event.type);
    return append(ctx, key, event);
  };
  const hook = createHook({
    init: (_id, type) => {
      if (counting) asyncResources.add(type);
    },
  });
  const restore = countBuiltins(builtins, () => counting);
  const peer = make({ inspect, clock, eventLog: log });
  restore();
  let i = 0;
  for (; i < warmup; i++) await peer.lifecycle(i);
  hook.enable();
  counting = true;
  for (const end = i + runs; i < end; i++) await peer.lifecycle(i);
  counting = false;
  hook.disable();
  await peer.close();
  const total = (tally: Tally) => round(tally.total / runs);
  const byActor = (tally: Tally) => {
    const sums = new Tally();
    for (const [key, n] of tally.counts) sums.add(key.split(':')[0]!, n);
    return sums.perRun(runs);
  };
  return {
    macrosteps: total(macrosteps),
    macrostepsByActor: byActor(macrosteps),
    events: macrosteps.perRun(runs),
    microsteps: total(microsteps),
    microstepsByActor: microsteps.perRun(runs),
    /** Actions XState executed (custom ones and built-ins that act: sendTo, spawnChild, …). */
    actionsExecuted: total(actions),
    actions: actions.perRun(runs),
    /** Named assign, updateContext and enqueueActions resolutions, which the inspector never sees. */
    assigns: round(
      [...builtins.counts].filter(([k]) => k.includes('.assign.')).reduce((s, [, n]) => s + n, 0) /
        runs,
    ),
    builtins: builtins.perRun(runs),
    actors: total(actors),
    actorsByKind: actors.perRun(runs),
    promises: round((asyncResources.counts.get('PROMISE') ?? 0) / runs),
    asyncResources: asyncResources.perRun(runs),
    timers: timers.perRun(runs),
    eventsLogged: total(logged),
  };
}

/** One measured round of one peer: its window, heap bytes and CPU µs per run. */
interface Round {
  from: number;
  to: number;
  bytes: number;
  cpuUs: number;
}

/**
 * Heap bytes allocated and CPU µs per run of each peer: rounds of the peers alternate (so a
 * busy host falls on both alike); bytes are the median over rounds with no collection inside,
 * CPU the median over all rounds, and `cpuRatio` the median of runplane ÷ bare per round pair.
 */
async function allocationPass(rounds: number, runsPerRound: number, warmup: number) {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc === undefined) throw new Error('run with node --expose-gc (npm run bench does)');
  const peers = { runplane: runplanePeer(), bare: barePeer() };
  const names = ['runplane', 'bare'] as const;
  const next = { runplane: 0, bare: 0 };
  for (const name of names)
    for (; next[name] < warmup; next[name]++) await peers[name].lifecycle(next[name]);
  // Start times of every collection; one inside a round makes its heap delta meaningless.
  const collectedAt: number[] = [];
  const collections = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) collectedAt.push(entry.startTime);
  });
  collections.observe({ entryTypes: ['gc'] });
  const measured = { runplane: [] as Round[], bare: [] as Round[] };
  for (let r = 0; r < rounds; r++) {
    for (const name of r % 2 === 0 ? names : [...names].reverse()) {
      const peer = peers[name];
      gc();
      const heapBefore = process.memoryUsage().heapUsed;
      const cpuBefore = process.cpuUsage();
      const from = performance.now();
      for (const end = next[name] + runsPerRound; next[name] < end; next[name]++) {
        await peer.lifecycle(next[name]);
      }
      const to = performance.now();
      const cpu = process.cpuUsage(cpuBefore);
      const heapAfter = process.memoryUsage().heapUsed;
      measured[name].push({
        from,
        to,
        bytes: (heapAfter - heapBefore) / runsPerRound,
        cpuUs: (cpu.user + cpu.system) / runsPerRound,
      });
    }
  }
  // Entries reach the observer a turn after their collection: let them arrive, take the rest.
  await new Promise((resolve) => setImmediate(resolve));
  await new Promise((resolve) => setImmediate(resolve));
  for (const entry of collections.takeRecords()) collectedAt.push(entry.startTime);
  collections.disconnect();
  for (const name of names) await peers[name].close();
  const of = (name: (typeof names)[number]) => {
    const clean = measured[name].filter((w) => !collectedAt.some((t) => t >= w.from && t <= w.to));
    return {
      bytesPerRun: clean.length === 0 ? Number.NaN : Math.round(median(clean.map((w) => w.bytes))),
      roundsKept: clean.length,
      cpuUsPerRun: round(median(measured[name].map((w) => w.cpuUs))),
    };
  };
  const cpuRatio = round(
    median(measured.runplane.map((w, r) => w.cpuUs / measured.bare[r]!.cpuUs)),
  );
  return { runplane: of('runplane'), bare: of('bare'), cpuRatio };
}

/**
 * runplane's heap bytes per run by phase: `prepare()` (the session's spawn step and the run
 * actor's start), `start()` (the session's admission step and the run's step into RUNNING), and
 * from `start()` returning to `termination` resolved (the agent, the run's step to its final
 * state, the session's step on its end). Each phase is measured with `heapUsed` before and
 * after it, less what reading `heapUsed` allocates itself; rounds in which a collection ran are
 * dropped, and each phase is the median over the rest.
 */
async function phasePass(rounds: number, runsPerRound: number, warmup: number) {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc === undefined) throw new Error('run with node --expose-gc (npm run bench does)');
  const runtime = createRuntime({
    stores: { eventLog: createMemoryEventLog({ maxEventsPerSession: 1_000 }) },
  });
  const heap = () => process.memoryUsage().heapUsed;
  let i = 0;
  const lifecycle = async (sums?: number[], overhead = 0) => {
    const h0 = heap();
    const run = runtime.prepare({
      ownerId: 'bench',
      sessionId: `seq-${Math.floor(i / 10)}`,
      agent: noop,
      input: i++,
    });
    const h1 = heap();
    run.start();
    const h2 = heap();
    await run.termination;
    const h3 = heap();
    if (sums === undefined) return;
    sums[0]! += h1 - h0 - overhead;
    sums[1]! += h2 - h1 - overhead;
    sums[2]! += h3 - h2 - overhead;
  };
  for (let w = 0; w < warmup; w++) await lifecycle();
  // What one heapUsed reading allocates: the median of back-to-back differences.
  const readings: number[] = [];
  for (let k = 0; k < 1_000; k++) {
    const a = heap();
    readings.push(heap() - a);
  }
  const overhead = median(readings);
  const collectedAt: number[] = [];
  const collections = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) collectedAt.push(entry.startTime);
  });
  collections.observe({ entryTypes: ['gc'] });
  const measured: Array<{ from: number; to: number; sums: number[] }> = [];
  for (let r = 0; r < rounds; r++) {
    gc();
    const sums = [0, 0, 0];
    const from = performance.now();
    for (let k = 0; k < runsPerRound; k++) await lifecycle(sums, overhead);
    measured.push({ from, to: performance.now(), sums });
  }
  await new Promise((resolve) => setImmediate(resolve));
  await new Promise((resolve) => setImmediate(resolve));
  for (const entry of collections.takeRecords()) collectedAt.push(entry.startTime);
  collections.disconnect();
  await runtime.shutdown({ graceMs: 0 });
  const clean = measured.filter((w) => !collectedAt.some((t) => t >= w.from && t <= w.to));
  const phase = (k: number) =>
    clean.length === 0
      ? Number.NaN
      : Math.round(median(clean.map((w) => w.sums[k]! / runsPerRound)));
  return { prepare: phase(0), start: phase(1), toSettled: phase(2), roundsKept: clean.length };
}

/** Counts and allocations of runplane and bare XState per no-op run. */
export async function runSteps(
  options: { runs?: number; rounds?: number; runsPerRound?: number } = {},
) {
  const runs = options.runs ?? 2_000;
  const rounds = options.rounds ?? 10;
  const runsPerRound = options.runsPerRound ?? 1_000;
  const warmup = 5_000;
  const alloc = await allocationPass(rounds, runsPerRound, warmup);
  const phases = await phasePass(rounds, runsPerRound, warmup);
  const counted = {
    runplane: await countedPass(runplanePeer, runs, warmup),
    bare: await countedPass(barePeer, runs, warmup),
  };
  return {
    runs,
    rounds,
    runsPerRound,
    /** runplane's CPU µs per run ÷ bare XState's, median of alternating round pairs. */
    cpuRatio: alloc.cpuRatio,
    /** runplane's heap bytes per run by phase (see `phasePass`). */
    bytesByPhase: phases,
    runplane: { ...counted.runplane, ...alloc.runplane },
    bare: { ...counted.bare, ...alloc.bare },
  };
}

/** Flattens `{ a: { b: 1 } }` into `{ 'a.b': 1 }` (a figure's detail holds numbers only). */
const prefixed = (prefix: string, values: Record<string, number>): Record<string, number> =>
  Object.fromEntries(Object.entries(values).map(([k, v]) => [`${prefix} ${k}`, v]));

/** The suite of bench/run.ts: one figure per count, runplane's value, bare XState's beside it. */
export async function runStepFigures(): Promise<Figure[]> {
  const { runplane: ours, bare, cpuRatio, bytesByPhase } = await runSteps();
  const figure = (name: string, unit: string, value: number, bareValue: number, detail = {}) => ({
    name: `run steps: ${name} per no-op run (runplane; bare XState in detail)`,
    value,
    unit,
    target: 'none (counted)',
    meets: true,
    detail: { bare: bareValue, ...detail },
  });
  return [
    figure(
      'XState macrosteps',
      'steps',
      ours.macrosteps,
      bare.macrosteps,
      prefixed('event', ours.events),
    ),
    figure('XState microsteps', 'steps', ours.microsteps, bare.microsteps, ours.microstepsByActor),
    figure('actions executed', 'actions', ours.actionsExecuted, bare.actionsExecuted, ours.actions),
    figure('assigns resolved', 'assigns', ours.assigns, bare.assigns, ours.builtins),
    figure('actors created', 'actors', ours.actors, bare.actors, ours.actorsByKind),
    figure('promises created', 'promises', ours.promises, bare.promises, ours.asyncResources),
    figure('events logged', 'events', ours.eventsLogged, bare.eventsLogged, ours.timers),
    figure('heap allocated', 'bytes', ours.bytesPerRun, bare.bytesPerRun, {
      roundsKept: ours.roundsKept,
      bareRoundsKept: bare.roundsKept,
      ...prefixed('phase', bytesByPhase),
    }),
    figure('CPU time', 'µs', ours.cpuUsPerRun, bare.cpuUsPerRun, { ratio: cpuRatio }),
  ];
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const [runs] = process.argv.slice(2).map(Number);
  console.log(JSON.stringify(await runSteps(runs === undefined ? {} : { runs }), null, 2));
}
