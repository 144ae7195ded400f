// StrykerJS over the machines and the run, session and TurnLoop wiring, judged by the race and
// model suites only (`npm run mutate`, never part of `npm test`; docs/mutation.md). Race
// properties run RACE_RUNS sequences under mutation (20 unless set), not 200.
import process from 'node:process';

process.env.RACE_RUNS ??= '20';

export default {
  testRunner: 'vitest',
  plugins: ['@stryker-mutator/vitest-runner'],
  vitest: { configFile: 'vitest.mutate.config.ts', related: false },
  // A small scope: 117 mutants, each rerunning some 2,000 race and model tests (docs/mutation.md
  // has the measured cost; widen it with `npx stryker run --mutate '<glob>'`).
  mutate: ['machines/cancel-request.ts', 'src/turn-loop/partition-items.ts'],
  coverageAnalysis: 'perTest',
  ignoreStatic: true,
  concurrency: 2,
  timeoutMS: 20_000,
  dryRunTimeoutMinutes: 20,
  reporters: ['clear-text', 'progress', 'json'],
  jsonReporter: { fileName: 'reports/mutation/mutation.json' },
  tempDirName: '.stryker-tmp',
  cleanTempDir: 'always',
  thresholds: { high: 85, low: 70, break: null },
};
