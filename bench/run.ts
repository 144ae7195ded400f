/**
 * `npm run bench`: runs every benchmark in one process, writes bench/results.json and prints a
 * markdown table with each figure beside its target. Never part of `npm test`.
 */
import { writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import {
  cancelLatency,
  lifecycleThroughput,
  memory,
  queueScaling,
  type Figure,
} from './core.bench.js';
import { turnLoopFigures } from './turn-loop.figures.js';
import { fanOut, manySessions, messageToFirstFrame } from './server.bench.js';

const figures: Figure[] = [];
const only = process.argv[2];
const suites: Array<[string, () => Promise<Figure | Figure[]>]> = [
  ['lifecycle', lifecycleThroughput],
  ['cancel', () => cancelLatency()],
  ['queue', queueScaling],
  ['memory', memory],
  ['turnloop', turnLoopFigures],
  ['serve-latency', () => messageToFirstFrame()],
  ['serve-fanout', () => fanOut()],
  ['serve-sessions', () => manySessions()],
];
for (const [name, suite] of suites) {
  if (only !== undefined && only !== name) continue;
  process.stderr.write(`bench: ${name}…\n`);
  const result = await suite();
  figures.push(...(Array.isArray(result) ? result : [result]));
}

const results = {
  node: process.version,
  cpu: cpus()[0]?.model ?? 'unknown',
  cores: cpus().length,
  at: new Date().toISOString(),
  figures,
};
writeFileSync(join(import.meta.dirname, 'results.json'), `${JSON.stringify(results, null, 2)}\n`);
console.log('| figure | value | target | |');
console.log('| --- | --- | --- | --- |');
for (const f of figures) {
  console.log(
    `| ${f.name} | ${f.value} ${f.unit} | ${f.target} | ${f.meets ? 'meets' : 'short'} |`,
  );
}
console.log(JSON.stringify(results));
