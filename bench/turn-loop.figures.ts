/**
 * The TurnLoop benchmarks (bench/turn-loop.bench.ts) as figures beside their targets (issue 3).
 */
import type { Figure } from './core.bench.js';
import { runTurnLoopBench } from './turn-loop.bench.js';

export async function turnLoopFigures(): Promise<Figure[]> {
  const r = await runTurnLoopBench();
  return [
    {
      name: 'TurnLoop push → turn started, p99',
      value: r.pushToTurnStarted.p99Ms,
      unit: 'ms',
      target: 'none (reported)',
      meets: true,
      detail: { p50Ms: r.pushToTurnStarted.p50Ms },
    },
    {
      name: 'TurnLoop preempt → next turn started (safe point every 1 ms), p99',
      value: r.preemptToNextTurn.p99Ms,
      unit: 'ms',
      target: '≤ 2 ms',
      meets: r.preemptToNextTurn.p99Ms <= 2,
      detail: { p50Ms: r.preemptToNextTurn.p50Ms },
    },
    {
      name: 'TurnLoop checkpoint save + load, 10,000 items, SQLite (max)',
      value: r.checkpointSqlite10k.saveAndLoadMs.maxMs,
      unit: 'ms',
      target: '≤ 50 ms',
      meets: r.checkpointSqlite10k.saveAndLoadMs.maxMs <= 50,
      detail: {
        p50Ms: r.checkpointSqlite10k.saveAndLoadMs.p50Ms,
        bytes: r.checkpointSqlite10k.checkpointBytes,
      },
    },
    {
      name: 'TurnLoop pushes per second into a busy loop (median)',
      value: r.pushesPerSecond.pushesPerSecondMedian,
      unit: 'pushes/s',
      target: '≥ 100,000',
      meets: r.pushesPerSecond.pushesPerSecondMedian >= 100_000,
    },
  ];
}
