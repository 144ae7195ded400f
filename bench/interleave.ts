/**
 * An interleaved sampler: every round runs a small batch of each peer, in a rotating order, so
 * machine load that comes and goes (a shared 2-core machine) falls on all peers alike.
 * Each operation is timed on its own; the result is per-peer medians, p99 and means in µs.
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

/** Runs every peer `rounds × batch` times, interleaved, and returns each peer's statistics. */
export async function interleave(
  peers: Record<string, TimedOp>,
  options: InterleaveOptions,
): Promise<Record<string, PeerStats>> {
  const names = Object.keys(peers);
  const samples = new Map<string, number[]>(names.map((n) => [n, []]));
  let i = 0;
  for (let r = 0; r < options.warmupRounds + options.rounds; r++) {
    for (let k = 0; k < names.length; k++) {
      const name = names[(r + k) % names.length]!;
      const op = peers[name]!;
      const into = samples.get(name)!;
      for (let b = 0; b < options.batch; b++) {
        const us = await op(i++);
        if (r >= options.warmupRounds) into.push(us);
      }
    }
  }
  return Object.fromEntries(names.map((n) => [n, stats(samples.get(n)!)]));
}
