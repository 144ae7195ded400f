/**
 * The vitest configuration `npm run mutate` (StrykerJS) runs: only the race and model suites, so
 * the mutation score says what those suites catch (docs/mutation.md).
 */
import { BaseSequencer, type TestSpecification } from 'vitest/node';
import { defineConfig } from 'vitest/config';
import base from './vitest.config.js';

/**
 * The cheap, sharp suites first (reference models, race properties), the path replays last and
 * the slowest of them (session paths) at the very end: Stryker bails at a mutant's first failing
 * test, so a mutant one of the first files kills never pays for the path suites.
 */
class CheapFirst extends BaseSequencer {
  override sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const rank = (file: TestSpecification) =>
      ['run.paths', 'turn-loop.paths', 'session.paths'].findIndex((name) =>
        file.moduleId.endsWith(`/${name}.test.ts`),
      );
    return Promise.resolve(
      [...files].sort(
        (a, b) =>
          rank(a) - rank(b) || (a.moduleId < b.moduleId ? -1 : a.moduleId > b.moduleId ? 1 : 0),
      ),
    );
  }
}

export default defineConfig({
  ...base,
  test: {
    ...base.test,
    include: ['test/race/**/*.test.ts', 'test/model/**/*.test.ts'],
    // It judges agents, not the runtime: its planted agent bugs need more than the 20 sequences
    // a mutant gets to be found, and it kills no mutant the runtime worlds do not.
    exclude: [...(base.test?.exclude ?? []), 'test/race/agent-contract.test.ts'],
    sequence: { sequencer: CheapFirst },
  },
});
