/**
 * `npm run bench [suite] [-- --rounds N]`: runs the benchmarks, writes bench/results.json (one
 * suite: bench/results-<suite>.json, so a full run's file is never cut down to one suite) and
 * prints two markdown tables: each runplane figure beside its target, and the peers side by side
 * (p50, p99, ratios to runplane and to bare XState). Never part of `npm test`.
 *
 * Every suite runs in a Node process of its own (this script with `--child <suite>`), one after
 * the other: a suite then never pays for the heap, the garbage or the loaded modules of the suites
 * before it (the 1,000-session and peer workloads leave plenty).
 *
 * `--rounds N` (default 1) runs the whole set N times, round after round; each figure and each
 * peer row then reports the median over rounds, with every round's value beside it (`values`).
 * The host is shared and its speed drifts, so the ratios (runplane ÷ bare XState, both measured
 * in the same process a few seconds apart) are the headline figures, not the absolute µs.
 *
 * Suites: lifecycle, cancel, concurrent, session-curve, turnloop, checkpoint,
 * checkpoint-incremental, memory, heap, serve-latency, serve-fanout, serve-sessions,
 * serve-hostile, retention, telemetry, run-steps, cluster. `BENCH_HEAP_SESSIONS` shrinks the
 * heap suite for a quick check (default 100,000 sessions × 10 runs); `BENCH_CLUSTER_ROUNDS`,
 * `BENCH_CLUSTER_FAILOVERS` and `BENCH_CLUSTER_SESSIONS` shrink the cluster suite,
 * `BENCH_CLUSTER_ONLY=cross` keeps its cancel and event figures, and `BENCH_CLUSTER_HOPS=1` adds
 * the cancel's hops.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { median, round, type Figure } from './core.bench.js';
import type { PeerRow } from './side-by-side.bench.js';

interface SuiteResult {
  figures: Figure[];
  rows: PeerRow[];
}

type Suite = () => Promise<SuiteResult | Figure | Figure[]>;

// Imported when run, so that a suite's process loads only its own modules.
const suites: Record<string, Suite> = {
  lifecycle: async () => (await import('./side-by-side.bench.js')).lifecycle(),
  cancel: async () => (await import('./side-by-side.bench.js')).cancel(),
  concurrent: async () => (await import('./side-by-side.bench.js')).concurrentSessions(),
  'session-curve': async () => (await import('./core.bench.js')).sessionCostCurve(),
  turnloop: async () => (await import('./turn-loop.figures.js')).turnLoopFigures(),
  checkpoint: async () => (await import('./turn-loop.figures.js')).checkpointFigures(),
  'checkpoint-incremental': async () =>
    (await import('./turn-loop.figures.js')).incrementalCheckpointFigures(),
  memory: async () => (await import('./core.bench.js')).memory(),
  heap: async () => (await import('./core.bench.js')).heapAfterManyRuns(),
  // Workload 8: `runplane serve` in its own process, this process the HTTP client.
  'serve-latency': async () => (await import('./server.bench.js')).messageToFirstFrame(),
  'serve-fanout': async () => (await import('./server.bench.js')).fanOut(),
  'serve-sessions': async () => (await import('./server.bench.js')).manySessions(),
  // RSS of a server under a hostile token holder, against its memory budgets.
  'serve-hostile': async () => (await import('./serve-hostile.bench.js')).serveHostile(),
  retention: async () => (await import('./retention.bench.js')).embeddedRetention(),
  // Run telemetry (spans, metrics) with no tracer provider: its share of a lifecycle.
  telemetry: async () => (await import('./telemetry.bench.js')).telemetryOverhead(),
  // A no-op run counted, beside bare XState: XState steps, actions, actors, promises, heap bytes.
  'run-steps': async () => (await import('./run-steps.bench.js')).runStepFigures(),
  // Issue 20: three `runplane serve --redis` processes over one private redis-server.
  cluster: async () => (await import('./cluster.bench.js')).clusterFigures(),
};

/** Node flags a suite's process needs beyond this script's own. */
const nodeFlagsOf: Partial<Record<string, string[]>> = {
  // A young generation that holds a round's garbage: the heap delta is what the round allocated.
  'run-steps': ['--min-semi-space-size=256', '--max-semi-space-size=256'],
};
const suiteNames = Object.keys(suites);

const { values: flags, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    rounds: { type: 'string', default: '1' },
    child: { type: 'string' },
    out: { type: 'string' },
  },
});

for (const name of [...positionals, ...(flags.child === undefined ? [] : [flags.child])]) {
  if (!(name in suites)) {
    throw new Error(`expected suite to be one of ${suiteNames.join(', ')}, got ${name}`);
  }
}

if (flags.child !== undefined) {
  // A suite's own process: run it, write its figures and rows to --out.
  if (flags.out === undefined) throw new Error('expected --out with --child');
  const result = await suites[flags.child]!();
  const done: SuiteResult = Array.isArray(result)
    ? { figures: result, rows: [] }
    : 'rows' in result
      ? result
      : { figures: [result], rows: [] };
  writeFileSync(flags.out, JSON.stringify(done));
  process.exit(0);
}

const rounds = Number(flags.rounds);
if (!Number.isSafeInteger(rounds) || rounds < 1) {
  throw new Error(`expected --rounds to be a positive integer, got ${flags.rounds}`);
}
if (positionals.length > 1) {
  throw new Error(`expected at most one suite, got ${positionals.join(', ')}`);
}
const only = positionals[0];
const selected = only === undefined ? suiteNames : [only];

/** A figure over rounds: the median value, every round's value, and the median of each detail. */
interface FigureOverRounds extends Figure {
  values: number[];
}

/** A peer row over rounds: the median of each field, and every round's ratios and p50. */
interface RowOverRounds extends PeerRow {
  values: { p50Us: number[]; ratioToRunplane: number[]; ratioToBare: number[] };
}

function groupBy<T>(items: T[], key: (item: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const k = key(item);
    const group = groups.get(k);
    if (group === undefined) groups.set(k, [item]);
    else group.push(item);
  }
  return groups;
}

const medianOf = <T>(items: T[], field: (item: T) => number): number =>
  round(median(items.map(field)));

/** Medians over the rounds run so far, with every round's values, and the run's context. */
function summarize(perRound: Array<SuiteResult & { loadavg: number[] }>) {
  const figures: FigureOverRounds[] = [
    ...groupBy(
      perRound.flatMap((r) => r.figures),
      (f) => f.name,
    ).values(),
  ].map((group) => {
    const values = group.map((f) => f.value);
    const value = median(values);
    // The median is one round's value: that round says whether its target was met.
    const at = group.find((f) => f.value === value) ?? group[0]!;
    const detailKeys = [...new Set(group.flatMap((f) => Object.keys(f.detail ?? {})))];
    const detail = Object.fromEntries(
      detailKeys.map((k) => [
        k,
        medianOf(
          group.filter((f) => f.detail?.[k] !== undefined),
          (f) => f.detail![k]!,
        ),
      ]),
    );
    return { ...at, value, detail, values };
  });

  const rows: RowOverRounds[] = [
    ...groupBy(
      perRound.flatMap((r) => r.rows),
      (row) => `${row.workload}\u0000${row.peer}`,
    ).values(),
  ].map((group) => ({
    workload: group[0]!.workload,
    peer: group[0]!.peer,
    p50Us: medianOf(group, (row) => row.p50Us),
    p99Us: medianOf(group, (row) => row.p99Us),
    meanUs: medianOf(group, (row) => row.meanUs),
    perSecond: Math.round(median(group.map((row) => row.perSecond))),
    ratioToRunplane: medianOf(group, (row) => row.ratioToRunplane),
    ratioToBare: medianOf(group, (row) => row.ratioToBare),
    values: {
      p50Us: group.map((row) => row.p50Us),
      ratioToRunplane: group.map((row) => row.ratioToRunplane),
      ratioToBare: group.map((row) => row.ratioToBare),
    },
  }));

  return {
    node: process.version,
    cpu: cpus()[0]?.model ?? 'unknown',
    cores: cpus().length,
    at: new Date().toISOString(),
    seconds: Math.round((performance.now() - t0) / 1_000),
    rounds: perRound.length,
    roundsAsked: rounds,
    loadavg: {
      before: loadBefore.map((l) => +l.toFixed(2)),
      afterEachRound: perRound.map((r) => r.loadavg),
    },
    figures,
    rows,
    perRound: perRound.map(({ figures: f, rows: r }) => ({ figures: f, rows: r })),
  };
}

const loadBefore = loadavg();
const t0 = performance.now();
const resultsFile = join(
  import.meta.dirname,
  only === undefined ? 'results.json' : `results-${only}.json`,
);
const scratch = mkdtempSync(join(tmpdir(), 'runplane-bench-'));
const perRound: Array<SuiteResult & { loadavg: number[] }> = [];
try {
  for (let r = 0; r < rounds; r++) {
    const thisRound: SuiteResult = { figures: [], rows: [] };
    for (const name of selected) {
      process.stderr.write(`bench: ${rounds > 1 ? `round ${r + 1}/${rounds}, ` : ''}${name}…\n`);
      const out = join(scratch, `${name}.json`);
      const child = spawnSync(
        process.execPath,
        [
          ...process.execArgv,
          ...(nodeFlagsOf[name] ?? []),
          fileURLToPath(import.meta.url),
          '--child',
          name,
          '--out',
          out,
        ],
        { stdio: ['ignore', 'inherit', 'inherit'] },
      );
      if (child.status !== 0) throw new Error(`bench suite ${name} failed (exit ${child.status})`);
      const done = JSON.parse(readFileSync(out, 'utf8')) as SuiteResult;
      thisRound.figures.push(...done.figures);
      thisRound.rows.push(...done.rows);
    }
    perRound.push({ ...thisRound, loadavg: loadavg().map((l) => +l.toFixed(2)) });
    // Written after every round, so a long run stopped early keeps the rounds it finished.
    writeFileSync(resultsFile, `${JSON.stringify(summarize(perRound), null, 2)}\n`);
  }
} finally {
  rmSync(scratch, { recursive: true, force: true });
}

const results = summarize(perRound);
const { figures, rows } = results;

const status = (f: Figure): string =>
  Number.isNaN(f.value) ? 'pending' : f.meets ? 'meets' : 'short';
const details = (f: Figure): string =>
  Object.entries(f.detail ?? {})
    .map(([k, v]) => `${k} ${v}`)
    .join(', ');
const valueHeader = rounds > 1 ? `median of ${rounds}` : 'value';
console.log(`| figure | ${valueHeader} | rounds | target | | detail (medians) |`);
console.log('| --- | --- | --- | --- | --- | --- |');
for (const f of figures) {
  const value = Number.isNaN(f.value) ? '—' : `${f.value} ${f.unit}`;
  console.log(
    `| ${f.name} | ${value} | ${f.values.join(', ')} | ${f.target} | ${status(f)} | ${details(f)} |`,
  );
}
if (rows.length > 0) {
  console.log(
    '\n| workload | peer | p50 µs | p99 µs | mean µs | ×runplane (p50) | ×bare XState (p50) | ×bare XState, rounds |',
  );
  console.log('| --- | --- | --- | --- | --- | --- | --- | --- |');
  for (const r of rows) {
    console.log(
      `| ${r.workload} | ${r.peer} | ${r.p50Us} | ${r.p99Us} | ${r.meanUs} | ${r.ratioToRunplane} | ${r.ratioToBare} | ${r.values.ratioToBare.join(', ')} |`,
    );
  }
}
console.log(
  `\n${results.at} · node ${results.node} · ${results.cores}× ${results.cpu} · load average ${results.loadavg.before.join(', ')} → ${perRound.at(-1)?.loadavg.join(', ')} · ${rounds} round(s) · ${results.seconds} s`,
);
