// StrykerJS over the machines and the run, session and TurnLoop wiring, judged by the race and
// model suites only (`npm run mutate`, never part of `npm test`; docs/mutation.md). Race
// properties run RACE_RUNS sequences under mutation (20 unless set), not 200.
import process from 'node:process';

process.env.RACE_RUNS ??= '20';
// The path suites replay their shortest and ignored-event paths, not the simple ones
// (test/model/path-kinds.ts).
process.env.MODEL_PATHS ??= 'shortest,ignored';

export default {
  testRunner: 'vitest',
  plugins: ['@stryker-mutator/vitest-runner'],
  vitest: { configFile: 'vitest.mutate.config.ts', related: false },
  mutate: [
    'machines/cancel-request.ts',
    'machines/run-queue.ts',
    'machines/child-ids.ts',
    'machines/clock-timer.ts',
    'src/runtime/run-slots.ts',
    'src/turn-loop/partition-items.ts',
  ],
  coverageAnalysis: 'perTest',
  ignoreStatic: true,
  concurrency: 2,
  timeoutMS: 20_000,
  dryRunTimeoutMinutes: 20,
  // `event-recorder` writes each mutant's result as it is tested (reports/mutation/events), so a
  // run that is stopped early still says which mutants survived.
  reporters: ['clear-text', 'progress', 'json', 'event-recorder'],
  jsonReporter: { fileName: 'reports/mutation/mutation.json' },
  eventReporter: { baseDir: 'reports/mutation/events' },
  tempDirName: '.stryker-tmp',
  cleanTempDir: 'always',
  thresholds: { high: 85, low: 70, break: null },
};
