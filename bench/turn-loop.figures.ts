/**
 * The TurnLoop benchmarks (bench/turn-loop.bench.ts) as figures beside their targets (issue 3):
 * workload 5 (preempt latency, with push latency and push throughput), and workload 6
 * (checkpoint save + load against item count, SQLite).
 */
import type { Figure } from './core.bench.js';
import {
  checkpointIncremental,
  checkpointSqlite,
  immerOnPushPath,
  preemptToNextTurn,
  pushesPerSecond,
  pushToTurnStarted,
} from './turn-loop.bench.js';

export async function turnLoopFigures(): Promise<Figure[]> {
  const push = await pushToTurnStarted(1_000, 500);
  const preempt = await preemptToNextTurn(1_000, 2_500);
  const pushes = await pushesPerSecond(100_000);
  return [
    {
      name: 'TurnLoop push → turn started, p99',
      value: push.p99Ms,
      unit: 'ms',
      target: 'none (reported)',
      meets: true,
      detail: { p50Ms: push.p50Ms },
    },
    {
      name: 'TurnLoop preempt → next turn started (safe point every 1 ms), p99 after 2,500 preempts',
      value: preempt.p99Ms,
      unit: 'ms',
      target: '≤ 2 ms',
      meets: preempt.p99Ms <= 2,
      detail: {
        p50Ms: preempt.p50Ms,
        waitForSafePointP99Ms: preempt.waitForSafePoint.p99Ms,
        safePointToNextTurnP50Ms: preempt.reaction.p50Ms,
        safePointToNextTurnP99Ms: preempt.reaction.p99Ms,
        coldP50Ms: preempt.cold.p50Ms,
        coldP99Ms: preempt.cold.p99Ms,
      },
    },
    {
      name: 'TurnLoop pushes per second into a busy loop (median)',
      value: pushes.pushesPerSecondMedian,
      unit: 'pushes/s',
      target: '≥ 100,000',
      meets: pushes.pushesPerSecondMedian >= 100_000,
    },
  ];
}

/** Checkpoint save (stop → written) + load (new loop → items offered), 100 → 100,000 items. */
export async function checkpointFigures(): Promise<Figure[]> {
  const figures: Figure[] = [];
  for (const [items, rounds] of [
    [100, 7],
    [1_000, 7],
    [10_000, 7],
    [100_000, 3],
  ] as const) {
    const r = await checkpointSqlite(items, rounds);
    const gated = items === 10_000;
    figures.push({
      name: `checkpoint save + load, ${items.toLocaleString('en-US')} items, SQLite (p50 / max)`,
      value: r.saveAndLoadMs.p50Ms,
      unit: 'ms',
      target: gated ? '≤ 50 ms (max)' : 'none (reported)',
      meets: gated ? r.saveAndLoadMs.maxMs <= 50 : true,
      detail: {
        maxMs: r.saveAndLoadMs.maxMs,
        saveP50Ms: r.stopToSavedMs.p50Ms,
        loadP50Ms: r.runToGenResumeMs.p50Ms,
        bytes: r.checkpointBytes,
        rounds,
      },
    });
  }
  return [...figures, ...(await incrementalCheckpointFigures())];
}

/**
 * Incremental checkpoints (issue 15): `loop.checkpoint()` after one push into a busy loop
 * holding 100,000 items, as an immer patch beside the whole save a store without `append` gets,
 * and the load of base + 10 patches beside the load of a whole save; immer on the push path.
 */
export async function incrementalCheckpointFigures(): Promise<Figure[]> {
  const r = await checkpointIncremental(100_000, 10, 1);
  const immer = immerOnPushPath(100_000, 2_000);
  return [
    {
      name: 'checkpoint() after one push, 100,000 items held, SQLite: patch save (median of 10)',
      value: r.patchSaveMedianMs,
      unit: 'ms',
      target: '≤ 5 ms',
      meets: r.patchSaveMedianMs <= 5,
      detail: {
        wholeSaveAfterPushMs: r.wholeSaveAfterPushMedianMs,
        firstSaveMs: r.firstSaveMedianMs,
        patchBytes: r.patchBytes,
      },
    },
    {
      name: 'checkpoint() after one push, 100,000 items held, SQLite: whole save (store without append)',
      value: r.wholeSaveAfterPushMedianMs,
      unit: 'ms',
      target: 'none (reported)',
      meets: true,
    },
    {
      name: 'checkpoint load, 100,000 items: base + 10 patches ÷ whole load',
      value: r.loadRatio,
      unit: '×',
      target: '≤ 1.5×',
      meets: r.loadRatio <= 1.5,
      detail: { chainLoadMs: r.chainLoadMedianMs, wholeLoadMs: r.wholeLoadMedianMs },
    },
    {
      name: 'immer produce per push into a chunked 100,000-item buffer (kept off the push path)',
      value: immer.immerUsPerPush,
      unit: 'µs',
      target: 'none (reported)',
      meets: true,
      detail: { inPlaceAppendUs: immer.plainUsPerPush },
    },
  ];
}
