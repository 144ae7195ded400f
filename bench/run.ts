/**
 * `npm run bench [suite]`: runs the benchmarks, writes bench/results.json (one suite:
 * bench/results-<suite>.json, so a full run's file is never cut down to one suite) and prints
 * two markdown tables: each runplane figure beside its target, and the peers side by side (p50,
 * p99, ratios to runplane and to bare XState). Never part of `npm test`.
 *
 * A full run starts each suite in a Node process of its own (this script, with the suite's
 * name), one after the other: a suite then never pays for the heap, the garbage or the loaded
 * modules of the suites before it (the 1,000-session and peer workloads leave plenty).
 *
 * Suites: lifecycle, cancel, concurrent, queue, turnloop, checkpoint, memory, serve-latency,
 * serve-fanout, serve-sessions, serve-hostile, retention.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { memory, queueScaling, type Figure } from './core.bench.js';
import { fanOut, manySessions, messageToFirstFrame } from './server.bench.js';
import { serveHostile } from './serve-hostile.bench.js';
import { embeddedRetention } from './retention.bench.js';
import { cancel, concurrentSessions, lifecycle, type PeerRow } from './side-by-side.bench.js';
import { checkpointFigures, turnLoopFigures } from './turn-loop.figures.js';

type SuiteResult = Figure | Figure[] | { figures: Figure[]; rows: PeerRow[] };

const suites: Array<[string, () => Promise<SuiteResult> | SuiteResult]> = [
  ['lifecycle', lifecycle],
  ['cancel', cancel],
  ['concurrent', () => concurrentSessions()],
  ['queue', queueScaling],
  ['turnloop', turnLoopFigures],
  ['checkpoint', checkpointFigures],
  ['memory', memory],
  // Workload 8: `runplane serve` in its own process, this process the HTTP client.
  ['serve-latency', () => messageToFirstFrame()],
  ['serve-fanout', () => fanOut()],
  ['serve-sessions', () => manySessions()],
  // Issue 14: RSS of a server under a hostile token holder, against its memory budgets.
  ['serve-hostile', serveHostile],
  ['retention', embeddedRetention],
];
const only = process.argv[2];
if (only !== undefined && !suites.some(([name]) => name === only)) {
  throw new Error(`expected suite to be one of ${suites.map(([n]) => n).join(', ')}, got ${only}`);
}

const figures: Figure[] = [];
const rows: PeerRow[] = [];
const loadBefore = loadavg();
const t0 = performance.now();
const resultsFile = (name: string | undefined) =>
  join(import.meta.dirname, name === undefined ? 'results.json' : `results-${name}.json`);
for (const [name, suite] of suites) {
  if (only !== undefined && only !== name) continue;
  process.stderr.write(`bench: ${name}…\n`);
  if (only === undefined) {
    // A fresh process per suite; it writes results-<name>.json, read back here.
    const child = spawnSync(
      process.execPath,
      [...process.execArgv, fileURLToPath(import.meta.url), name],
      { stdio: ['ignore', 'ignore', 'inherit'] },
    );
    if (child.status !== 0) throw new Error(`bench suite ${name} failed (exit ${child.status})`);
    const done = JSON.parse(readFileSync(resultsFile(name), 'utf8')) as {
      figures: Figure[];
      rows: PeerRow[];
    };
    figures.push(...done.figures);
    rows.push(...done.rows);
    continue;
  }
  const result = await suite();
  if (Array.isArray(result)) figures.push(...result);
  else if ('rows' in result) {
    figures.push(...result.figures);
    rows.push(...result.rows);
  } else figures.push(result);
}

const results = {
  node: process.version,
  cpu: cpus()[0]?.model ?? 'unknown',
  cores: cpus().length,
  at: new Date().toISOString(),
  seconds: Math.round((performance.now() - t0) / 1_000),
  loadavg: {
    before: loadBefore.map((l) => +l.toFixed(2)),
    after: loadavg().map((l) => +l.toFixed(2)),
  },
  figures,
  rows,
};
writeFileSync(resultsFile(only), `${JSON.stringify(results, null, 2)}\n`);

const status = (f: Figure): string =>
  Number.isNaN(f.value) ? 'pending' : f.meets ? 'meets' : 'short';
const details = (f: Figure): string =>
  Object.entries(f.detail ?? {})
    .map(([k, v]) => `${k} ${v}`)
    .join(', ');
console.log('| figure | value | target | | detail |');
console.log('| --- | --- | --- | --- | --- |');
for (const f of figures) {
  const value = Number.isNaN(f.value) ? '—' : `${f.value} ${f.unit}`;
  console.log(`| ${f.name} | ${value} | ${f.target} | ${status(f)} | ${details(f)} |`);
}
if (rows.length > 0) {
  console.log(
    '\n| workload | peer | p50 µs | p99 µs | mean µs | ×runplane (p50) | ×bare XState (p50) |',
  );
  console.log('| --- | --- | --- | --- | --- | --- | --- |');
  for (const r of rows) {
    console.log(
      `| ${r.workload} | ${r.peer} | ${r.p50Us} | ${r.p99Us} | ${r.meanUs} | ${r.ratioToRunplane} | ${r.ratioToBare} |`,
    );
  }
}
console.log(
  `\n${results.at} · node ${results.node} · ${results.cores}× ${results.cpu} · load average ${results.loadavg.before.join(', ')} → ${results.loadavg.after.join(', ')} · ${results.seconds} s`,
);
