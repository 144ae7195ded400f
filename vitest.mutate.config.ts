/**
 * The vitest configuration `npm run mutate` (StrykerJS) runs: only the race and model suites, so
 * the mutation score says what those suites catch (docs/mutation.md).
 */
import { defineConfig } from 'vitest/config';
import base from './vitest.config.js';

export default defineConfig({
  ...base,
  test: {
    ...base.test,
    include: ['test/race/**/*.test.ts', 'test/model/**/*.test.ts'],
    // It judges agents, not the runtime: its planted agent bugs need more than the 20 sequences
    // a mutant gets to be found, and it kills no mutant the runtime worlds do not.
    exclude: [...(base.test?.exclude ?? []), 'test/race/agent-contract.test.ts'],
  },
});
