/**
 * `npm run bench`: runs every benchmark and prints one JSON object (also written to
 * bench/results.json, which is gitignored). Never part of `npm test`.
 */
import { writeFileSync } from 'node:fs';
import { runTurnLoopBench } from './turn-loop.bench.js';

const results = {
  at: new Date().toISOString(),
  turnLoop: await runTurnLoopBench(),
};
const json = JSON.stringify(results, null, 2);
writeFileSync(new URL('./results.json', import.meta.url), `${json}\n`);
console.log(json);
