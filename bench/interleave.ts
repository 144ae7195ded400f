/**
 * An interleaved sampler: every round runs a small batch of each peer, so machine load that comes
 * and goes (a shared 2-core machine) falls on all peers alike. Each operation is timed on its own;
 * the result is per-peer medians, p99 and means in µs.
 *
 * The order within rounds is balanced for carryover. A batch runs slower right after a peer that
 * left much garbage: V8 sweeps and collects it while the next batch runs, on the main thread or
 * on the other core's hyperthread. Measured here (p50 of 100-run batches, shuffled order): bare
 * XState 25 µs after most peers, 42 µs right after the OpenAI Agents Runner. A plain rotation puts
 * each peer after the same predecessor in almost every round, so one peer paid for another's
 * garbage every time; the rows of a Williams design do not (see {@link balancedOrders}).
 */
import { performance } from 'node:perf_hooks';
import { percentile, round } from './core.bench.js';

/** One operation of a peer; resolves when the operation has settled. */
export type PeerOp = (i: number) => Promise<unknown>;

/** A peer's own measurement of one operation in µs (for latencies timed inside the op). */
export type TimedOp = (i: number) => Promise<number>;

export interface PeerStats {
  samples: number;
  p50Us: number;
  p99Us: number;
  meanUs: number;
}

/** A peer's interleaved statistics, and the p50 of each of its counted batches in round order. */
export interface InterleavedStats extends PeerStats {
  batchP50Us: number[];
}

/**
 * The median over rounds of `a`'s batch p50 ÷ `b`'s batch p50 in the same round: a ratio of two
 * peers measured milliseconds apart, so a slow spell of the host (or of V8's collector) that
 * spans a round falls on both sides of it.
 */
export function pairedRatio(a: InterleavedStats, b: InterleavedStats): number {
  const ratios = a.batchP50Us.map((us, r) => us / b.batchP50Us[r]!);
  return round(percentile(ratios, 0.5));
}

export interface InterleaveOptions {
  rounds: number;
  /** Operations of one peer per round. */
  batch: number;
  /** Rounds run first and not counted (JIT, lazy module loading). */
  warmupRounds: number;
}

export function stats(samplesUs: number[]): PeerStats {
  const mean = samplesUs.reduce((a, b) => a + b, 0) / samplesUs.length;
  return {
    samples: samplesUs.length,
    p50Us: round(percentile(samplesUs, 0.5)),
    p99Us: round(percentile(samplesUs, 0.99)),
    meanUs: round(mean),
  };
}

/** Times each op from call to settlement. */
export function timed(op: PeerOp): TimedOp {
  return async (i) => {
    const t0 = performance.now();
    await op(i);
    return (performance.now() - t0) * 1_000;
  };
}

/**
 * The orders of a Williams design for `n` peers (a balanced Latin square): `n` rows for an even
 * `n`, `2n` for an odd one. Across its rows every peer runs in every position equally often and
 * comes right after every other peer exactly once (twice for an odd `n`), so first-order
 * carryover falls on all peers alike. Row `r` is the first row with `r` added to each index.
 */
export function balancedOrders(n: number): number[][] {
  // First row 0, 1, n−1, 2, n−2, …: its steps are all distinct modulo n when n is even.
  const first = Array.from({ length: n }, (_, k) =>
    k === 0 ? 0 : k % 2 === 1 ? (k + 1) / 2 : n - k / 2,
  );
  const rows = Array.from({ length: n }, (_, r) => first.map((x) => (x + r) % n));
  return n % 2 === 0 ? rows : [...rows, ...rows.map((row) => [...row].reverse())];
}

/**
 * Runs every peer `rounds × batch` times, interleaved, and returns each peer's statistics. Round
 * `r` runs the peers in row `r` of {@link balancedOrders}, cycling; a multiple of its row count
 * in `rounds` balances the order exactly (warm-up rounds come before and are not counted).
 */
export async function interleave(
  peers: Record<string, TimedOp>,
  options: InterleaveOptions,
): Promise<Record<string, InterleavedStats>> {
  const names = Object.keys(peers);
  const orders = balancedOrders(names.length);
  const samples = new Map<string, number[]>(names.map((n) => [n, []]));
  const batchP50s = new Map<string, number[]>(names.map((n) => [n, []]));
  let i = 0;
  for (let r = 0; r < options.warmupRounds + options.rounds; r++) {
    const counted = r - options.warmupRounds;
    const order = orders[((counted % orders.length) + orders.length) % orders.length]!;
    for (const k of order) {
      const name = names[k]!;
      const op = peers[name]!;
      const into = samples.get(name)!;
      const from = into.length;
      for (let b = 0; b < options.batch; b++) {
        const us = await op(i++);
        if (counted >= 0) into.push(us);
      }
      if (counted >= 0) batchP50s.get(name)!.push(percentile(into.slice(from), 0.5));
    }
  }
  return Object.fromEntries(
    names.map((n) => [n, { ...stats(samples.get(n)!), batchP50Us: batchP50s.get(n)! }]),
  );
}
