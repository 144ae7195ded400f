/**
 * Workloads 1–3 of issue 8, every peer of bench/peers.ts in one process, interleaved round by
 * round: sequential lifecycle, cancel latency (running → settled), and 1,000 concurrent
 * sessions × 10 runs. Returns the runplane figures beside their targets and a row per peer.
 */
import { performance } from 'node:perf_hooks';
import type { Figure } from './core.bench.js';
import { median, round } from './core.bench.js';
import {
  interleave,
  pairedRatio,
  stats,
  timed,
  type InterleavedStats,
  type PeerStats,
  type TimedOp,
} from './interleave.js';
import { createPeers, type Peer } from './peers.js';

/** One peer's result in one workload, with its ratios (p50) to runplane and to bare XState. */
export interface PeerRow {
  workload: string;
  peer: string;
  p50Us: number;
  p99Us: number;
  meanUs: number;
  perSecond: number;
  ratioToRunplane: number;
  ratioToBare: number;
}

export interface SideBySide {
  figures: Figure[];
  rows: PeerRow[];
}

const RUNPLANE = 'runplane';
const BARE = 'bare XState';
const OPENAI = 'OpenAI Agents Runner';

/**
 * A ratio of runplane's interleaved p50 to a peer's, against a target (issue 13): the figure is
 * the ratio of the p50s over all samples; `detail` adds the median of the per-round ratios.
 */
function interleavedRatio(
  name: string,
  ours: InterleavedStats,
  peer: InterleavedStats,
  target: number,
): Figure {
  const value = round(ours.p50Us / peer.p50Us);
  return {
    name,
    value,
    unit: '×',
    target: `≤ ${target}×`,
    meets: value <= target,
    detail: {
      p50Us: ours.p50Us,
      peerP50Us: peer.p50Us,
      medianOfRoundRatios: pairedRatio(ours, peer),
      rounds: ours.batchP50Us.length,
    },
  };
}

function toRows(workload: string, byPeer: Record<string, PeerStats>): PeerRow[] {
  const ours = byPeer[RUNPLANE]!;
  const bare = byPeer[BARE]!;
  return Object.entries(byPeer).map(([peer, s]) => ({
    workload,
    peer,
    p50Us: s.p50Us,
    p99Us: s.p99Us,
    meanUs: s.meanUs,
    perSecond: Math.round(1e6 / s.meanUs),
    ratioToRunplane: round(s.p50Us / ours.p50Us),
    ratioToBare: round(s.p50Us / bare.p50Us),
  }));
}

async function withPeers<T>(body: (peers: Record<string, Peer>) => Promise<T>): Promise<T> {
  const peers = createPeers();
  try {
    return await body(peers);
  } finally {
    for (const peer of Object.values(peers)) await peer.close();
  }
}

/**
 * Runs each peer's op alone, `batch` times in a row per pass, the peers' passes alternating, so
 * no peer pays for another's garbage (LangGraph's MemorySaver retains every checkpoint).
 * Returns per-op samples (µs) and the wall time per op (µs, median of passes) of each peer.
 */
async function solo(
  ops: Record<string, TimedOp>,
  options: { passes: number; batch: number; warmup: number },
): Promise<Record<string, PeerStats & { wallUs: number }>> {
  const names = Object.keys(ops);
  const samples = new Map<string, number[]>(names.map((n) => [n, []]));
  const walls = new Map<string, number[]>(names.map((n) => [n, []]));
  let i = 0;
  for (const name of names) for (let w = 0; w < options.warmup; w++) await ops[name]!(i++);
  for (let pass = 0; pass < options.passes; pass++) {
    for (const name of pass % 2 === 0 ? names : [...names].reverse()) {
      const op = ops[name]!;
      const into = samples.get(name)!;
      const t0 = performance.now();
      for (let b = 0; b < options.batch; b++) into.push(await op(i++));
      walls.get(name)!.push(((performance.now() - t0) * 1_000) / options.batch);
    }
  }
  return Object.fromEntries(
    names.map((n) => [n, { ...stats(samples.get(n)!), wallUs: stats(walls.get(n)!).p50Us }]),
  );
}

/**
 * Workload 1: one no-op run after another, each timed from call to settlement. The figures come
 * from runplane and bare XState measured alone (alternating passes); the peers table from all
 * peers interleaved round by round.
 */
export function lifecycle(): Promise<SideBySide> {
  return withPeers(async (peers) => {
    const ops: Record<string, TimedOp> = {};
    for (const [name, peer] of Object.entries(peers)) {
      // A session (thread) per 10 runs: LangGraph's MemorySaver lists a thread's history.
      ops[name] = timed((i) => peer.run(i, `seq-${Math.floor(i / 10)}`));
    }
    const alone = await solo(
      { [RUNPLANE]: ops[RUNPLANE]!, [BARE]: ops[BARE]! },
      { passes: 6, batch: 5_000, warmup: 2_000 },
    );
    const ours = alone[RUNPLANE]!;
    const bare = alone[BARE]!;
    const byPeer = await interleave(ops, { rounds: 18, batch: 100, warmupRounds: 2 });
    const runsPerSecond = 1e6 / ours.wallUs;
    const figures: Figure[] = [
      interleavedRatio(
        'lifecycle: runplane ÷ bare XState, µs per run (p50, interleaved with the peers)',
        byPeer[RUNPLANE]!,
        byPeer[BARE]!,
        1.75,
      ),
      {
        name: 'lifecycle: runplane ÷ bare XState, µs per run (p50, alone)',
        value: round(ours.p50Us / bare.p50Us),
        unit: '×',
        target: '≤ 1× (the bare XState machine)',
        meets: ours.p50Us <= bare.p50Us,
        detail: {
          p50Us: ours.p50Us,
          bareP50Us: bare.p50Us,
          p99Us: ours.p99Us,
          bareP99Us: bare.p99Us,
          interleavedP50Us: byPeer[RUNPLANE]!.p50Us,
          interleavedBareP50Us: byPeer[BARE]!.p50Us,
        },
      },
      {
        name: 'lifecycle: runs per second, sequential (alone, wall time of 5,000-run passes)',
        value: Math.round(runsPerSecond),
        unit: 'runs/s',
        target: '≥ 10,000',
        meets: runsPerSecond >= 10_000,
        detail: {
          bareRunsPerSecond: Math.round(1e6 / bare.wallUs),
          interleavedByMean: Math.round(1e6 / byPeer[RUNPLANE]!.meanUs),
        },
      },
    ];
    return {
      figures,
      rows: toRows('1. lifecycle, sequential', byPeer),
    };
  });
}

/**
 * Workload 2: a run whose agent awaits a cancellable timer is cancelled by the peer's own cancel;
 * timed from the cancel request until the peer reports the run over and the agent's promise has
 * settled (see bench/peers.ts). runplane's figure is `run.cancel()` → `await run.termination`.
 */
export function cancel(): Promise<SideBySide> {
  return withPeers(async (peers) => {
    const ops: Record<string, TimedOp> = {};
    for (const [name, peer] of Object.entries(peers)) {
      ops[name] = async (i) => {
        const blocked = await peer.startBlocked(i);
        const t0 = performance.now();
        await blocked.cancel();
        return (performance.now() - t0) * 1_000;
      };
    }
    const alone = await solo(
      { [RUNPLANE]: ops[RUNPLANE]!, [BARE]: ops[BARE]! },
      { passes: 4, batch: 2_000, warmup: 500 },
    );
    const ours = alone[RUNPLANE]!;
    const bare = alone[BARE]!;
    const byPeer = await interleave(ops, { rounds: 18, batch: 50, warmupRounds: 2 });
    const figures: Figure[] = [
      interleavedRatio(
        'cancel → settled: runplane ÷ OpenAI Agents Runner (p50, interleaved with the peers)',
        byPeer[RUNPLANE]!,
        byPeer[OPENAI]!,
        1,
      ),
      {
        name: 'cancel → settled: runplane ÷ bare XState (p50, alone)',
        value: round(ours.p50Us / bare.p50Us),
        unit: '×',
        target: 'none (reported)',
        meets: true,
        detail: {
          p50Us: ours.p50Us,
          bareP50Us: bare.p50Us,
          p99Us: ours.p99Us,
          bareP99Us: bare.p99Us,
          interleavedRatio: round(byPeer[RUNPLANE]!.p50Us / byPeer[BARE]!.p50Us),
        },
      },
      {
        name: 'cancel → termination resolved, p99 (alone)',
        value: ours.p99Us,
        unit: 'µs',
        target: '≤ 200 µs',
        meets: ours.p99Us <= 200,
        detail: {
          p50Us: ours.p50Us,
          samples: ours.samples,
          interleavedP99Us: byPeer[RUNPLANE]!.p99Us,
          bareInterleavedP99Us: byPeer[BARE]!.p99Us,
        },
      },
    ];
    return { figures, rows: toRows('2. cancel, running → settled', byPeer) };
  });
}

/**
 * Workload 3: 1,000 sessions (threads for LangGraph) each doing 10 runs one after another, all
 * sessions at once. Each run is timed on its own; the figure is runplane's wall time per run ÷
 * bare XState's doing the same work, taken per round (the two measured in the same round, a few
 * seconds apart) and the median over rounds.
 */
export function concurrentSessions(sessions = 1_000, runsPerSession = 10): Promise<SideBySide> {
  return withPeers(async (peers) => {
    const names = Object.keys(peers);
    const perRun = new Map<string, number[]>(names.map((n) => [n, []]));
    const wallPerRun = new Map<string, number[]>(names.map((n) => [n, []]));
    const rounds = 3;
    // Warm-up (JIT, lazy module loading): a tenth of the sessions, not counted.
    for (const name of names) {
      await Promise.all(
        Array.from({ length: Math.ceil(sessions / 10) }, async (_, s) => {
          for (let j = 0; j < runsPerSession; j++) await peers[name]!.run(j, `warm-s${s}`);
        }),
      );
    }
    for (let r = 0; r < rounds; r++) {
      for (let k = 0; k < names.length; k++) {
        const name = names[(r + k) % names.length]!;
        const peer = peers[name]!;
        const latencies: number[] = [];
        const t0 = performance.now();
        await Promise.all(
          Array.from({ length: sessions }, async (_, s) => {
            const key = `r${r}-s${s}`;
            for (let j = 0; j < runsPerSession; j++) {
              const t = performance.now();
              await peer.run(s * runsPerSession + j, key);
              latencies.push((performance.now() - t) * 1_000);
            }
          }),
        );
        const wallUs = ((performance.now() - t0) * 1_000) / (sessions * runsPerSession);
        perRun.get(name)!.push(...latencies);
        wallPerRun.get(name)!.push(wallUs);
      }
    }
    const byPeer: Record<string, PeerStats> = {};
    for (const name of names) {
      const s = stats(perRun.get(name)!);
      // p50/p99 are per-run latencies under 1,000-way concurrency; mean is wall time per run.
      byPeer[name] = { ...s, meanUs: stats(wallPerRun.get(name)!).p50Us };
    }
    const ours = byPeer[RUNPLANE]!;
    const bare = byPeer[BARE]!;
    const bareWalls = wallPerRun.get(BARE)!;
    const ratios = wallPerRun.get(RUNPLANE)!.map((us, r) => us / bareWalls[r]!);
    const ratio = median(ratios);
    const runsPerSecond = 1e6 / ours.meanUs;
    const label = `${sessions.toLocaleString('en-US')} sessions × ${runsPerSession} runs`;
    return {
      figures: [
        {
          name: `${label}: runplane ÷ bare XState, wall time per run (median of ${rounds} rounds)`,
          value: round(ratio),
          unit: '×',
          target: '≤ 1× (the bare XState machine)',
          meets: ratio <= 1,
          detail: {
            wallUsPerRun: ours.meanUs,
            bareWallUsPerRun: bare.meanUs,
            runsPerSecond: Math.round(runsPerSecond),
            p99RunUs: ours.p99Us,
          },
        },
      ],
      rows: toRows(`3. ${label} (mean = wall µs per run)`, byPeer),
    };
  });
}
