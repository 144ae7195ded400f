/**
 * TurnLoop benchmarks (issue 3, "Performance"). Real clock, real SQLite file; prints JSON.
 * Run with `npm run bench` or `npx tsx bench/turn-loop.bench.ts`. Never part of `npm test`.
 *
 * - pushToTurnStarted: an idle loop, one push → the turn's agent starts executing.
 * - preemptToNextTurn: the agent reaches a safe point every 1 ms; a preempting push → the next
 *   turn's agent starts (target p99 ≤ 2 ms). Measured in steady state, after `warmup` preempts:
 *   V8 keeps optimizing functions that run once per turn for the first ~2,000 turns (--trace-opt
 *   shows 135, 64, 36, 40, 13 and 9 functions optimized in successive blocks of 500), and its
 *   compile jobs compete with the loop for this machine's two cores. The first 500 preempts
 *   after start are reported beside it as `cold`.
 * - checkpointSqlite10k: a stop with 10,000 buffered items → the checkpoint is written; then a
 *   new loop loads it and offers the items to genInput (target save + load ≤ 50 ms).
 * - pushesPerSecond: pushes into a loop whose turn is busy (target ≥ 100,000/s).
 * - checkpointIncremental (issue 15): `loop.checkpoint()` of a busy loop holding 100,000 items,
 *   then one push + a save, as a patch (target ≤ 5 ms) and as a whole save; the load of
 *   base + patches against the load of a whole save (target ≤ 1.5×).
 * - immerOnPushPath: what one immer `produce` per push into a chunked 100,000-item buffer costs,
 *   against the in-place append the loop does (why immer stays off the push path).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { freeze, produce } from 'immer';
import {
  CancelMode,
  createRuntime,
  createTurnLoop,
  sleep,
  type Agent,
  type CheckpointStore,
  type RunContext,
} from '../src/index.js';
import { createSqliteCheckpointStore } from '../src/stores/sqlite/index.js';

const quantile = (samples: number[], q: number): number => {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;
};
const summary = (samples: number[]) => ({
  n: samples.length,
  p50Ms: +quantile(samples, 0.5).toFixed(3),
  p99Ms: +quantile(samples, 0.99).toFixed(3),
  maxMs: +Math.max(...samples).toFixed(3),
});

interface Started {
  at: number;
  ctx: RunContext;
  finish(): void;
}

/** An agent that records when each execution starts and waits for `finish()` or its signal. */
function recordingAgent(onStart: (started: Started) => void): Agent<unknown, string> {
  return {
    execute: (_input, ctx) =>
      new Promise<string>((resolve, reject) => {
        ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason as Error), {
          once: true,
        });
        onStart({ at: performance.now(), ctx, finish: () => resolve('ok') });
      }),
  };
}

export async function pushToTurnStarted(rounds: number, warmup: number) {
  const runtime = createRuntime();
  let waiter: ((s: Started) => void) | undefined;
  const agent = recordingAgent((s) => waiter?.(s));
  const loop = createTurnLoop<number>({
    runtime,
    ownerId: 'bench',
    sessionId: 'push-latency',
    genInput: (items) => ({ input: items, consumed: items }),
    prepareAgent: () => agent,
  });
  loop.run();
  const samples: number[] = [];
  for (let i = 0; i < warmup + rounds; i++) {
    const started = new Promise<Started>((resolve) => (waiter = resolve));
    const t0 = performance.now();
    loop.push(i);
    const s = await started;
    if (i >= warmup) samples.push(s.at - t0);
    s.finish();
    await new Promise((resolve) => setImmediate(resolve));
  }
  loop.stop();
  await loop.wait();
  await runtime.shutdown({ graceMs: 100 });
  return summary(samples);
}

export async function preemptToNextTurn(rounds: number, warmup: number) {
  const runtime = createRuntime();
  let waiter: ((at: number) => void) | undefined;
  let lastSafePointAt = 0;
  // Reaches a safe point every 1 ms until cancelled: on a 1 ms grid from its start, so a timer
  // that fires late shortens the next wait instead of pushing every later safe point back.
  const agent: Agent<unknown, string> = {
    async execute(_input, ctx) {
      const startedAt = performance.now();
      waiter?.(startedAt);
      for (let k = 1; ; k++) {
        await sleep(ctx.clock, Math.max(0, startedAt + k - performance.now()), ctx.signal);
        k = Math.max(k, Math.floor(performance.now() - startedAt)); // skip missed grid points
        lastSafePointAt = performance.now();
        ctx.safePoint('afterToolCalls');
      }
    },
  };
  const loop = createTurnLoop<number>({
    runtime,
    ownerId: 'bench',
    sessionId: 'preempt-latency',
    genInput: (items) => ({ input: items, consumed: items }),
    prepareAgent: () => agent,
  });
  let first = new Promise<number>((resolve) => (waiter = resolve));
  loop.push(-1);
  loop.run();
  await first;
  const samples: number[] = [];
  const reactions: number[] = [];
  const waits: number[] = [];
  const cold: number[] = [];
  for (let i = 0; i < warmup + rounds; i++) {
    // Let the running turn settle into its 1 ms rhythm at a random phase.
    await sleep(runtime.clock, 2 + Math.random() * 3);
    first = new Promise<number>((resolve) => (waiter = resolve));
    const t0 = performance.now();
    loop.push(i, { preempt: CancelMode.AnySafePoint });
    const startedAt = await first;
    if (i < 500) cold.push(startedAt - t0);
    if (i >= warmup) {
      samples.push(startedAt - t0);
      waits.push(lastSafePointAt - t0); // the agent's part: push → its next safe point
      reactions.push(startedAt - lastSafePointAt); // runplane's part: safe point → next turn
    }
  }
  loop.stop({ mode: 'immediate' });
  await loop.wait();
  await runtime.shutdown({ graceMs: 100 });
  return {
    ...summary(samples),
    waitForSafePoint: summary(waits),
    reaction: summary(reactions),
    cold: summary(cold),
  };
}

/** A stop with `items` buffered → SQLite checkpoint written; a new loop loads it. */
export async function checkpointSqlite(items: number, rounds: number) {
  const dir = mkdtempSync(join(tmpdir(), 'runplane-bench-'));
  const saves: number[] = [];
  const loads: number[] = [];
  const totals: number[] = [];
  let bytes = 0;
  try {
    for (let r = 0; r < rounds; r++) {
      const filename = join(dir, `cp-${r}.db`);
      const store = createSqliteCheckpointStore({ filename });
      const runtime = createRuntime();
      let started: Started | undefined;
      const agent = recordingAgent((s) => (started = s));
      const first = createTurnLoop<{ id: number; text: string }>({
        runtime,
        ownerId: 'bench',
        sessionId: 'checkpoint',
        store,
        checkpointId: 'cp',
        genInput: (all) => ({ input: all[0], consumed: all.slice(0, 1), remaining: all.slice(1) }),
        prepareAgent: () => agent,
      });
      first.push({ id: -1, text: 'running' });
      first.run();
      while (started === undefined) await new Promise((resolve) => setImmediate(resolve));
      for (let i = 0; i < items; i++) {
        first.push({ id: i, text: `buffered message number ${i} with a little text in it` });
      }
      // Measure the save itself: the turn is cancelled first (immediately), then the save runs.
      const originalSet = store.set.bind(store);
      let saveMs = 0;
      store.set = async (ctx, id, data) => {
        const t = performance.now();
        await originalSet(ctx, id, data);
        saveMs = performance.now() - t;
        bytes = data.length;
      };
      const t0 = performance.now();
      first.stop({ mode: 'immediate' });
      const exit = await first.wait();
      const stopToSaved = performance.now() - t0;
      if (exit.checkpointError !== undefined) throw exit.checkpointError as Error;

      let offered = 0;
      const t1 = performance.now();
      let loaded!: () => void;
      const planned = new Promise<void>((resolve) => (loaded = resolve));
      const second = createTurnLoop<{ id: number; text: string }>({
        runtime,
        ownerId: 'bench',
        sessionId: 'checkpoint',
        store,
        checkpointId: 'cp',
        genInput: (all) => ({ input: all, consumed: [], remaining: all }),
        genResume: (args) => {
          offered = args.interrupted.length + args.unhandled.length + args.newItems.length;
          loaded();
          return { input: 0, consumed: [], remaining: [...args.interrupted, ...args.unhandled] };
        },
        prepareAgent: () => agent,
      });
      second.run();
      await planned;
      const loadMs = performance.now() - t1;
      if (offered !== items + 1) throw new Error(`expected ${items + 1} items, got ${offered}`);
      second.stop({ skipCheckpoint: true });
      await second.wait();
      store.close();
      await runtime.shutdown({ graceMs: 100 });
      saves.push(stopToSaved);
      loads.push(loadMs);
      totals.push(stopToSaved + loadMs);
      void saveMs;
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return {
    items,
    checkpointBytes: bytes,
    stopToSavedMs: summary(saves),
    runToGenResumeMs: summary(loads),
    saveAndLoadMs: summary(totals),
  };
}

export async function pushesPerSecond(pushes: number) {
  const runtime = createRuntime();
  let started: Started | undefined;
  const agent = recordingAgent((s) => (started = s));
  const loop = createTurnLoop<number>({
    runtime,
    ownerId: 'bench',
    sessionId: 'throughput',
    genInput: (items) => ({
      input: items[0],
      consumed: items.slice(0, 1),
      remaining: items.slice(1),
    }),
    prepareAgent: () => agent,
  });
  loop.push(-1);
  loop.run();
  while (started === undefined) await new Promise((resolve) => setImmediate(resolve));
  for (let i = 0; i < 50_000; i++) loop.push(i); // warm-up
  const rates: number[] = [];
  for (let round = 0; round < 3; round++) {
    const t0 = performance.now();
    for (let i = 0; i < pushes; i++) loop.push(i);
    rates.push((pushes / (performance.now() - t0)) * 1000);
  }
  loop.stop({ mode: 'immediate', skipCheckpoint: true });
  const exit = await loop.wait();
  await runtime.shutdown({ graceMs: 100 });
  return {
    pushesPerRound: pushes,
    rounds: rates.map(Math.round),
    pushesPerSecondMedian: Math.round(quantile(rates, 0.5)),
    unhandledAtExit: exit.unhandledItems.length,
  };
}

export async function runTurnLoopBench() {
  return {
    node: process.version,
    // Warm-up rounds (JIT, lazy module loading) are run first and not counted.
    pushToTurnStarted: await pushToTurnStarted(1_000, 500),
    preemptToNextTurn: await preemptToNextTurn(1_000, 2_500),
    checkpointSqlite10k: await checkpointSqlite(10_000, 5),
    pushesPerSecond: await pushesPerSecond(100_000),
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  console.log(JSON.stringify(await runTurnLoopBench(), null, 2));
}

type Item = { id: number; text: string };
const median = (samples: number[]) => +quantile(samples, 0.5).toFixed(3);

/** The store as a user's store without `append` / `load`: every save is whole. */
const wholeOnly = (store: CheckpointStore): CheckpointStore => ({
  get: (ctx, id) => store.get(ctx, id),
  set: (ctx, id, data) => store.set(ctx, id, data),
  delete: (ctx, id) => store.delete(ctx, id),
});

/** A new loop on `store` loads the checkpoint; ms from `run()` to genResume offering every item. */
async function timeLoad(store: CheckpointStore, expected: number): Promise<number> {
  const runtime = createRuntime();
  let offered = 0;
  let loaded!: () => void;
  const planned = new Promise<void>((resolve) => (loaded = resolve));
  const loop = createTurnLoop<Item>({
    runtime,
    ownerId: 'bench',
    sessionId: 'incremental-load',
    store,
    checkpointId: 'cp',
    genInput: (all) => ({ input: all, consumed: [], remaining: all }),
    genResume: (args) => {
      offered = args.interrupted.length + args.unhandled.length + args.newItems.length;
      loaded();
      return { input: 0, consumed: [], remaining: [...args.interrupted, ...args.unhandled] };
    },
    prepareAgent: () => ({ execute: () => Promise.resolve('unused') }),
  });
  const t0 = performance.now();
  loop.run();
  await planned;
  const ms = performance.now() - t0;
  if (offered !== expected) throw new Error(`expected ${expected} items, got ${offered}`);
  loop.stop({ skipCheckpoint: true });
  await loop.wait();
  await runtime.shutdown({ graceMs: 100 });
  return ms;
}

/**
 * `loop.checkpoint()` of a live loop holding `items` buffered items (its turn busy), SQLite:
 * the first save (whole), then `patches` times one push + a save (a patch each; whole with a
 * store that lacks `append`), then the load of base + patches against the load of a whole save.
 */
export async function checkpointIncremental(items: number, patches: number, rounds: number) {
  const dir = mkdtempSync(join(tmpdir(), 'runplane-bench-'));
  const result = {
    firstSaveMs: [] as number[],
    patchSaveMs: [] as number[],
    wholeSaveAfterPushMs: [] as number[],
    chainLoadMs: [] as number[],
    wholeLoadMs: [] as number[],
    patchBytes: 0,
  };
  try {
    for (let r = 0; r < rounds; r++) {
      for (const incremental of [true, false]) {
        const sqlite = createSqliteCheckpointStore({
          filename: join(dir, `inc-${r}-${incremental}.db`),
        });
        const store = incremental ? sqlite : wholeOnly(sqlite);
        const runtime = createRuntime();
        let started: Started | undefined;
        const loop = createTurnLoop<Item>({
          runtime,
          ownerId: 'bench',
          sessionId: 'incremental',
          store,
          checkpointId: 'cp',
          genInput: (all) => ({
            input: all[0],
            consumed: all.slice(0, 1),
            remaining: all.slice(1),
          }),
          prepareAgent: () => recordingAgent((s) => (started = s)),
        });
        loop.push({ id: -1, text: 'running' });
        loop.run();
        while (started === undefined) await new Promise((resolve) => setImmediate(resolve));
        for (let i = 0; i < items; i++) {
          loop.push({ id: i, text: `buffered message number ${i} with a little text in it` });
        }
        let t = performance.now();
        await loop.checkpoint();
        if (incremental) result.firstSaveMs.push(performance.now() - t);
        const saves: number[] = [];
        for (let p = 0; p < patches; p++) {
          loop.push({ id: items + p, text: 'one more message' });
          t = performance.now();
          await loop.checkpoint();
          saves.push(performance.now() - t);
        }
        (incremental ? result.patchSaveMs : result.wholeSaveAfterPushMs).push(median(saves));
        if (incremental) {
          const chain = await sqlite.load({}, 'cp');
          result.patchBytes = chain?.patches.reduce((sum, p) => sum + p.length, 0) ?? 0;
          if (chain?.patches.length !== patches) throw new Error('expected a chain of patches');
        }
        // A crash: the checkpoint is read by a new loop while this one still runs.
        const loadMs = await timeLoad(store, items + patches + 1);
        (incremental ? result.chainLoadMs : result.wholeLoadMs).push(loadMs);
        loop.stop({ mode: 'immediate', skipCheckpoint: true });
        await loop.wait();
        sqlite.close();
        await runtime.shutdown({ graceMs: 100 });
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return {
    items,
    patches,
    rounds,
    firstSaveMedianMs: median(result.firstSaveMs),
    patchSaveMedianMs: median(result.patchSaveMs),
    wholeSaveAfterPushMedianMs: median(result.wholeSaveAfterPushMs),
    chainLoadMedianMs: median(result.chainLoadMs),
    wholeLoadMedianMs: median(result.wholeLoadMs),
    loadRatio: +(median(result.chainLoadMs) / median(result.wholeLoadMs)).toFixed(2),
    patchBytes: result.patchBytes,
  };
}

/**
 * What immer would cost on the push path: one `produce` per push into a chunked buffer of
 * `items` items (one chunk copied, the chunk record copied), against the plain in-place append.
 */
export function immerOnPushPath(items: number, pushes: number) {
  const size = 512;
  let ledger: { next: number; chunks: Record<string, readonly number[]> } = { next: 0, chunks: {} };
  for (let at = 0; at < items; at += size) {
    ledger.chunks[ledger.next++] = Array.from(
      { length: Math.min(size, items - at) },
      (_, i) => at + i,
    );
  }
  ledger = freeze(ledger, true);
  let t = performance.now();
  for (let i = 0; i < pushes; i++) {
    ledger = produce(ledger, (draft) => {
      const last = draft.chunks[draft.next - 1] as number[];
      if (last.length < size) last.push(i);
      else draft.chunks[draft.next++] = [i];
    });
  }
  const immerUs = ((performance.now() - t) / pushes) * 1000;
  const plain: number[] = Array.from({ length: items }, (_, i) => i);
  t = performance.now();
  for (let i = 0; i < pushes; i++) plain.push(i);
  const plainUs = ((performance.now() - t) / pushes) * 1000;
  return {
    items,
    pushes,
    immerUsPerPush: +immerUs.toFixed(3),
    plainUsPerPush: +plainUs.toFixed(4),
  };
}
